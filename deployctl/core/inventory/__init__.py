"""Inventory: read the YAML file (with line numbers) and validate it statically."""
