"""Pure parsers for the read-only preflight probes: command output text in, fact models out."""
