"""The package version (one place; the hooks key their cached config on it)."""

__version__ = "0.1.0"
