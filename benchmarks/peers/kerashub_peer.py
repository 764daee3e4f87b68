"""The peer the benchmarks measure against: the keras-hub model a Keras user would train.

The model of the keras-hub baseline the project measures itself against (``kerashub_seq2seq/train.py``
in the team's shared baselines, not part of this repository: the keras.io "English-to-Spanish
translation with KerasHub" recipe): learned positions, separate input and target embeddings, an
untied output layer, dropout inside attention too. Also what both sides of a comparison share:
keras.io-style fixed-length batches, matmul FLOPs of a step and this machine's matmul peak.
Needs ``pip install keras-hub`` (the test extras have it).
"""

from __future__ import annotations

import time

import keras
import numpy as np
import tensorflow as tf


def kerashub_seq2seq(vocab, d_model, heads, ffn, layers, dropout, max_len):
    """``(encoder, decoder, model)`` as the baseline builds them: the decoder takes the target
    prefix, the encoder outputs and the encoder's padding mask, so that its samplers can call it."""
    import keras_hub

    source = keras.Input((None,), dtype="int32", name="source_ids")
    x = keras_hub.layers.TokenAndPositionEmbedding(vocab, max_len, d_model)(source)
    for _ in range(layers):
        x = keras_hub.layers.TransformerEncoder(ffn, heads, dropout=dropout)(
            x, padding_mask=keras.ops.not_equal(source, 0))
    encoder = keras.Model(source, x, name="encoder")
    target = keras.Input((None,), dtype="int32", name="target_ids")
    memory = keras.Input((None, d_model), name="encoder_outputs")
    memory_mask = keras.Input((None,), dtype="bool", name="encoder_padding_mask")
    y = keras_hub.layers.TokenAndPositionEmbedding(vocab, max_len, d_model)(target)
    for _ in range(layers):
        y = keras_hub.layers.TransformerDecoder(ffn, heads, dropout=dropout)(
            decoder_sequence=y, encoder_sequence=memory, decoder_padding_mask=keras.ops.not_equal(target, 0),
            encoder_padding_mask=memory_mask)
    y = keras.layers.Dropout(dropout)(y)
    decoder = keras.Model([target, memory, memory_mask], keras.layers.Dense(vocab)(y), name="decoder")
    logits = decoder([target, encoder(source), keras.ops.not_equal(source, 0)])
    return encoder, decoder, keras.Model({"source_ids": source, "target_ids": target}, logits, name="kerashub")


def kerashub_model(vocab, d_model, heads, ffn, layers, dropout, max_len):
    """The baseline's model for training: ``{"source_ids", "target_ids"}`` in, logits out."""
    return kerashub_seq2seq(vocab, d_model, heads, ffn, layers, dropout, max_len)[2]


def step_flops(batch, length, vocab, d_model, ffn, layers):
    """Matmul FLOPs of one training step (forward + backward = 3x forward) on padded batches.

    Per token, each weight does a multiply-add (2 FLOPs) forward; attention adds QK^T and AV.
    Both models have the same matmuls (keras-hub's untied output layer costs what the tied one does).
    """
    tokens = batch * length
    encoder = layers * (4 * d_model**2 + 2 * d_model * ffn) * tokens
    decoder = layers * (8 * d_model**2 + 2 * d_model * ffn) * tokens
    output = d_model * vocab * tokens
    attention = 3 * layers * 2 * batch * length * length * d_model  # enc self, dec self, cross
    return 3 * 2 * (encoder + decoder + output + attention)


def matmul_peak(size=2048, repeats=10) -> float:
    """FLOP/s of one float32 ``size``^3 matmul per call, the best of ``repeats``."""
    a = tf.random.normal((size, size))
    b = tf.random.normal((size, size))
    matmul = tf.function(lambda x, y: tf.matmul(x, y))
    matmul(a, b).numpy()
    best = min(timed(lambda: matmul(a, b).numpy()) for _ in range(repeats))
    return 2 * size**3 / best


def timed(fn) -> float:
    tick = time.perf_counter()
    fn()
    return time.perf_counter() - tick


def tokenized_rows(corpus, split, tokenizer):
    """``(source + EOS, BOS + target, target + EOS)`` id lists of every pair of ``split``."""
    pairs = list(corpus.pairs(split))
    src = tokenizer.tokenize([s for s, _ in pairs]).to_list()
    tgt = tokenizer.tokenize([t for _, t in pairs]).to_list()
    return [(s + [tokenizer.eos_id], [tokenizer.bos_id] + t, t + [tokenizer.eos_id]) for s, t in zip(src, tgt)]


def fixed_batches(rows, batch, length, limit=None, shuffle=True):
    """keras.io style: every pair of ``tokenized_rows`` padded to ``length`` tokens, longer pairs dropped."""
    rows = [row for row in rows if len(row[0]) <= length and len(row[2]) <= length]
    order = np.random.default_rng(0).permutation(len(rows)) if shuffle else np.arange(len(rows))
    out = []
    for start in range(0, len(order) - batch + 1, batch):
        arrays = np.zeros((3, batch, length), np.int32)
        for i, j in enumerate(order[start:start + batch]):
            for k in range(3):
                arrays[k, i, :len(rows[j][k])] = rows[j][k]
        out.append(tuple(tf.constant(a) for a in arrays))
        if limit and len(out) >= limit:
            break
    return out


def add_model_arguments(parser) -> None:
    """The shape both models get (cpu-small's by default) and keras.io's batches and Adam rate."""
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ffn", type=int, default=1024)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--batch", type=int, default=64, help="sentences per keras.io batch")
    parser.add_argument("--length", type=int, default=64, help="tokens every keras.io sentence is padded to")
    parser.add_argument("--learning-rate", type=float, default=5e-4)


def add_data_arguments(parser, work_dir: str) -> None:
    """The corpus and vocabulary options both training benchmarks take."""
    from pathlib import Path

    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--work-dir", type=Path, default=Path(work_dir))
    parser.add_argument("--corpus-dir", type=Path, help="a prepared corpus (default: the bundled DDTP En-De)")
    parser.add_argument("--tokenizer", type=Path, help="a SentencePiece model (default: trained here)")


def corpus_and_tokenizer(args):
    """The bundled DDTP En-De corpus (or ``--corpus-dir``) and a shared SentencePiece model on it."""
    from pipelines.corpus import Corpus
    from pipelines.tasks.translation.sources import SourceConfig, prepare_corpus
    from pipelines.tokenization import TokenizerConfig, load_tokenizers, train_tokenizer
    from pipelines.vocabulary import Vocabulary

    corpus = Corpus.load(args.corpus_dir or prepare_corpus(SourceConfig(
        source="ddtp", language_pair="en-de", output_dir=str(args.work_dir / "data"))))
    models = Vocabulary(args.tokenizer) if args.tokenizer else train_tokenizer(
        corpus, TokenizerConfig(vocab_size=args.vocab_size), args.work_dir / "tokenizer")
    return corpus, load_tokenizers(models).source
