"""What the synthesis tests share: a real tiny teacher, trained on a few pairs and exported for the engine."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

import keras_transformer as kt
from tests.keras_transformer.tiny_models import numpy_init

PAIRS = [
    ("The package provides a library.", "Das Paket stellt eine Bibliothek bereit."),
    ("This tool converts images.", "Dieses Werkzeug wandelt Bilder um."),
    ("Fonts for the desktop.", "Schriften für den Desktop."),
    ("A small and fast server.", "Ein kleiner und schneller Server."),
    ("Shows the current weather.", "Zeigt das aktuelle Wetter."),
    ("Plugins for the editor.", "Erweiterungen für den Editor."),
    ("Data files for the game.", "Datendateien für das Spiel."),
]


def train_teacher(tokenizer, path):
    """A one-layer model fitted to :data:`PAIRS` until it reproduces them, exported for the engine (int8)."""
    from keras_transformer.decoding.ctranslate2_export import convert_to_ctranslate2
    from keras_transformer.decoding.settings import DecodingSettings

    model = kt.Transformer(vocab_size=tokenizer.vocab_size, num_layers=1, d_model=64, num_heads=4, d_ff=128,
                           dropout=0.0)
    numpy_init(model, 0)  # the same start every time: a teacher that learnt its pairs
    eos, bos, pad = model.config.eos_id, model.config.bos_id, model.config.pad_id
    sources = [ids + [eos] for ids in tokenizer.tokenize(tf.constant([s for s, _ in PAIRS])).to_list()]
    targets = tokenizer.tokenize(tf.constant([t for _, t in PAIRS])).to_list()
    width, length = max(map(len, sources)), max(map(len, targets)) + 1
    src = np.full((len(PAIRS), width), pad, np.int32)
    tgt_in, tgt_out = np.full((2, len(PAIRS), length), pad, np.int32)
    for i, (s, t) in enumerate(zip(sources, targets)):
        src[i, : len(s)] = s
        tgt_in[i, : len(t) + 1] = [bos] + t
        tgt_out[i, : len(t) + 1] = t + [eos]
    model.compile(optimizer=keras.optimizers.Adam(3e-3), label_smoothing=0.0)
    # 300 updates on all the pairs, as one epoch: 300 epochs of one batch cost an epoch's overhead each.
    model.fit(tf.data.Dataset.from_tensors(((src, tgt_in), tgt_out)).repeat(300), epochs=1, shuffle=False,
              verbose=0)
    decoding = DecodingSettings(beam_size=2, max_length_offset=10, split_sentences=True, repetition_guard=8)
    return convert_to_ctranslate2(model, tokenizer, path, "int8", decoding)
