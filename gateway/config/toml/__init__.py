"""config.toml itself: its commented template, a change to one key that keeps what the
person wrote, and keys that moved between versions."""
