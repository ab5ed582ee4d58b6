"""pytest hooks and fixtures of the perf suite (placeholder)."""
