"""Tasks beyond translation that the paper evaluates the Transformer on (section 6.3: constituency parsing)."""
