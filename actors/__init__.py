"""The Ray layer: partition actors, controller, client routing and the `raygroups` CLI."""
