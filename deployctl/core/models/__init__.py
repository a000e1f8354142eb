"""Pydantic models only: no I/O, no subprocess, no network."""
