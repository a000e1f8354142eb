"""Executors: the only place deployctl touches hosts (SSH now; Ansible and Kubernetes later)."""
