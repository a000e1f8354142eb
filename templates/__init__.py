"""Text templates (Jinja2, StrictUndefined) shipped as package data `deployctl.templates`."""
