"""What the model library's tests share: a tiny built Transformer over the test tokenizer."""

from __future__ import annotations

import keras_transformer as kt


def tiny_transformer(vocab_size: int, num_layers: int = 1) -> kt.Transformer:
    """A built, dropout-free Transformer small enough to decode in milliseconds."""
    model = kt.Transformer(vocab_size=vocab_size, num_layers=num_layers, d_model=32, num_heads=2, d_ff=64,
                           dropout=0.0)
    model.build()
    return model
