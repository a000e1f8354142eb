"""Allow `python -m deployctl`."""

from deployctl.cli import main

main()
