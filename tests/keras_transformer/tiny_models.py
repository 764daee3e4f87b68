"""What the model library's tests share: a tiny built Transformer over the test tokenizer."""

from __future__ import annotations

import numpy as np

import keras_transformer as kt


def tiny_transformer(vocab_size: int, num_layers: int = 1) -> kt.Transformer:
    """A built, dropout-free Transformer small enough to decode in milliseconds."""
    model = kt.Transformer(vocab_size=vocab_size, num_layers=num_layers, d_model=32, num_heads=2, d_ff=64,
                           dropout=0.0)
    model.build()
    return model


def save_as_before_decoding_was_kept(model: kt.Transformer, path) -> None:
    """Save ``model`` as a ``.keras`` file whose config lacks ``decoding``, as models were saved
    before they kept their preset's decoding."""
    import json
    import zipfile

    model.save(path)
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(members["config.json"])
    del config["config"]["decoding"]
    members["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def numpy_init(model, seed):
    """Deterministic Glorot-uniform weights from NumPy.

    Not ``keras.utils.set_random_seed``: its ``tf.random.set_seed`` resets TensorFlow's kernel
    cache, which deletes tensorflow_text SentencePiece resources other tests still hold
    (tensorflow/text#570). Biases stay zero and layer-norm scales one.
    """
    model.build()
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        if len(shape) >= 2:
            limit = np.sqrt(6.0 / (shape[0] + shape[-1]))
            weight.assign(rng.uniform(-limit, limit, shape).astype(weight.dtype))
    return model
