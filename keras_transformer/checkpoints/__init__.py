"""The model's checkpoints: reading, matching and loading them, and averaging the last ones (section 6.1)."""
