"""pytest hooks and fixtures of the report suite (placeholder)."""
