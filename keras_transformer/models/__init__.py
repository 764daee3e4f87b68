"""The Transformer (section 3), its typed config and the presets of Table 3 (``presets.yaml``)."""
