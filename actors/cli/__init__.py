"""The `raygroups` command line.

Owns: the command and its plugin mechanism (`main.py`: `start`, `stop`, and
the `raygroups.commands` entry points through which the demo, the gateway
and the analytics add their commands), the admin commands modelled on
kafka-consumer-groups.sh (`admin.py`: list, status, delete, reassign,
elect-leader; `describe.py` with `group_views.py`, both group types as
Kafka's tool shows them; `reset.py`: reset-offsets, delete-offsets),
the status table (`status_table.py`) and the output rules every table
follows (`tables.py`: a table on a terminal, plain full-width lines when
piped, JSON with --json, never a cut value).

Imports: `actors` (the public API), `actors.service`, `actors.client`,
`actors.core`, `coordinator`. Never `gateway` or `spark_bridge`: they plug in.
"""
