"""The model's checkpoints: reading, matching and loading them, averaging the last ones (section 6.1), and a
saved ``.keras`` model loaded with the decoder it calls for."""
