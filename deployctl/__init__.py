"""deployctl: plan, render and launch MindIE deployments on Ascend A2/A3 clusters."""

__version__ = "0.1.0"
