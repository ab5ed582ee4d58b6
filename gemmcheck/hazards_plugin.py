"""pytest hooks and fixtures of the hazards suite (placeholder)."""
