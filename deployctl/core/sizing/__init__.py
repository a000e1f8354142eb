"""Planning: layout degrees, rank assignment and memory fit (pure)."""
