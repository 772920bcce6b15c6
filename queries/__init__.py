"""Named, reusable solver queries (TOML)."""
