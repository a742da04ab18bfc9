"""What every part of the Ray layer shares.

Owns: the service's settings and names (`settings.py`: `ServiceSettings`,
the controller's and registry's actor names, defaults by cluster size), the
compact pickled form of the core's messages between processes (`wire.py`,
registered when `actors` is imported), the named detached singleton actors
(`singleton.py`), node names, the stable identity of a node and its disk
(`node_names.py`), and the metrics of partitions and the controller
(`metrics.py`, through `ray.util.metrics`), and the watches of the topic
registry's ACLs and settings every authorizer and leader holds (`acl_watch.py`,
`settings_watch.py`), and the actors attached to the service (`attached.py`).

Rules: no actor lives here and nothing here decides protocol behaviour.
Imports: `coordinator`, `log`, Ray; no other subpackage of `actors`.
"""
