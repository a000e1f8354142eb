"""The operation: what every backend shares, imported by both ``deploy`` (hosts over SSH/Ansible) and ``k8s``.

The stage machine (pipeline.py: observe → lock → apply → verify → record, with Outcome and UnitCheck), the lock
owner (lockinfo.py), the local run record (records.py), the history row (historyrow.py) and the key-level diff
of rendered files (filediff.py). Nothing here knows a backend or an engine (docs/dev/architecture.md).
"""
