"""Fleets: several instances behind one router (deployctl's HAProxy for mixed replicas, the engine's own for
xPyD), and rolling updates one instance at a time."""
