"""Preflight: probe hosts read-only over SSH, then judge the facts with named rules."""
