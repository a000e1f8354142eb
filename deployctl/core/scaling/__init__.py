"""Elastic scaling's pure half: from readings of a role's load to an instance count, with the reason."""
