"""Mapping: processor, kernel-memory and bias-memory allocation (pure functions)."""
