"""The public Python API (placeholder)."""
