"""Judging a run: the oracle, hazard detectors, defects, isolation, sanitizer, kill matrix."""
