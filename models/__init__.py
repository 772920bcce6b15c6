"""Per-architecture model files (TOML)."""
