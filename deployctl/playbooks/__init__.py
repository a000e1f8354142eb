"""Ansible playbooks deployctl runs through ansible-runner (also usable with ansible-playbook directly)."""
