"""`deployctl scale`: each role's instance count from the engines' measured load against what one instance
sustains (the plan's estimate): read (read.py), decide per role (deployctl.core.scaling), recommend (shadow.py)."""
