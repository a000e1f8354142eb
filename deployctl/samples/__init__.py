"""The sample inventory and the examples `deployctl init` writes (package data: deployctl/samples/inventories/).

A byte-identical copy of the repository's inventories/ tree, which the README, the docs and the tests name:
tests/app/test_init.py fails when the two differ. After changing inventories/, copy it here:

    rm -r deployctl/samples/inventories && cp -r inventories deployctl/samples/
"""
