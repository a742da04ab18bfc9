"""Backup and restore of a whole service (`raygroups backup`, `raygroups restore`).

Owns: taking a consistent cut of a running service's offsets log through its
partition actors (`take.py`), starting a new service from a backup on any
cluster (`restore.py`), and their command line (`command.py`, added to
`raygroups` by `actors.cli`). The disk format, the manifest, the checks and
the files beside a restored log are `log`'s (`log.backup_manifest`,
`log.backup_hold`, `log.backup_files`); the partition actors' side is
`actors/partition/export.py` (called by method name, never imported).

Imports: `actors` (the public API: `start`), `actors.service`,
`actors.client`, `actors.core`, `log`.
"""
