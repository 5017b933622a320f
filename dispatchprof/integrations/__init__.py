"""Integrations with other libraries (imported on demand: accelerate is an optional extra)."""
