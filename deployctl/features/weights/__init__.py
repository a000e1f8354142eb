"""The checkpoint's files on every node: compare them (check.py) and copy what differs (sync.py)."""
