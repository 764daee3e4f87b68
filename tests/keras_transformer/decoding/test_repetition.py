"""The repetition guard: no third copy in a row of an n-gram of pieces begins; two copies are allowed."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer
from keras_transformer.decoding.beam import beam_search_decode
from keras_transformer.decoding.repetition import RepetitionGuard
from keras_transformer.decoding.translator import Translator
from tests.keras_transformer.tiny_models import tiny_transformer

BOS = 2


def banned(guard, written):
    ids = tf.constant([[BOS, *written, 0, 0, 0]], tf.int32)
    mask = guard.mask(ids, len(written)).numpy()[0]
    return [token for token in range(guard.vocab_size) if np.isneginf(mask[token])]


@pytest.mark.parametrize("written, expected", [
    ([], []), ([5], []), ([5, 5], [5]),               # a third "5" would loop; a second may come
    ([4, 5, 4], []), ([4, 5, 4, 5], [4]),             # "4 5" twice is fine, a third copy may not begin
    ([6, 7, 8, 6, 7, 8], [6]),                        # period 3: "Kerberos , Kerberos ," then no "Kerberos"
    ([6, 7, 8, 6, 7], []),                            # the second copy is not complete yet
    ([6, 7, 8, 9, 6, 7, 8, 9], []),                   # period 4: longer than this guard's 3
    ([5, 5, 4], []), ([4, 5, 4, 5, 6], []),           # the run was broken
    ([5, 5, 4, 4], [4]),                              # only the last run counts
])
def test_the_guard_bans_the_token_that_begins_a_third_copy(written, expected):
    assert banned(RepetitionGuard(10, max_period=3), written) == expected


def test_settings_are_checked():
    with pytest.raises(ValueError, match="repetition_guard"):
        RepetitionGuard(10, max_period=0)


def looping_model():
    """A model whose every step prefers token 5: unguarded it writes 5 5 5 ..."""
    model = Transformer(vocab_size=12, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0)
    model.build()
    rng = np.random.default_rng(0)
    model.set_weights([rng.normal(0.0, 0.05, w.shape).astype(w.dtype) for w in model.get_weights()])
    bias = np.zeros([12, 16], np.float32)
    bias[5] = 3.0
    model.target_embedding.embeddings.assign(model.target_embedding.embeddings + bias)
    return model


def begins_third_copy(ids, max_period):
    """Whether ``ids`` holds an m-gram twice in a row followed by the m-gram's first token."""
    ids = list(ids)
    return any(ids[i : i + m] == ids[i + m : i + 2 * m] and ids[i + 2 * m] == ids[i]
               for m in range(1, max_period + 1) for i in range(len(ids) - 2 * m))


@pytest.mark.parametrize("beam_size", [1, 3])
def test_beam_search_with_the_guard_writes_no_third_copy(beam_size):
    model, source = looping_model(), tf.constant([[4, 6, 7, 3], [8, 9, 3, 0]], tf.int32)
    plain = beam_search_decode(model, source, beam_size, 0.6, 12)
    guard = RepetitionGuard(12, max_period=4)
    guarded = beam_search_decode(model, source, beam_size, 0.6, 12, constraint=guard, slots=tf.constant([0, 0]))

    def outputs(result):
        lengths = result.lengths.numpy()[:, 0]
        return [row[:n] for row, n in zip(result.ids.numpy()[:, 0], lengths)]

    assert any(begins_third_copy(ids, 4) for ids in outputs(plain))  # the model does loop
    assert not any(begins_third_copy(ids, 4) for ids in outputs(guarded))


def test_a_translator_takes_the_guard_without_slots(tokenizer):
    """Translation passes the guard as a constraint with no per-sentence input; every output is
    free of third copies and the same sentences decode alike in any batch."""
    model = tiny_transformer(tokenizer.vocab_size, num_layers=1)
    guard = RepetitionGuard(tokenizer.vocab_size, max_period=4)
    recording = RecordingTokenizer(tokenizer)
    translator = Translator(model, tokenizer, recording)
    sentences = ["Shows the current weather.", "Documentation", "This package contains the development files."]
    guarded = translator.translate(sentences, beam_size=2, max_length_offset=12, constraint=guard)
    assert guarded == translator.translate(sentences, beam_size=2, max_length_offset=12, constraint=guard,
                                           batch_size=1)
    # The guard holds for the pieces decoded; the text tokenized again may split otherwise.
    assert len(recording.rows) >= len(sentences)
    for row in recording.rows:
        ids = row[: row.index(tokenizer.eos_id)] if tokenizer.eos_id in row else row
        assert not begins_third_copy([i for i in ids if i != 0], 4)


def test_a_translator_takes_the_guard_from_its_decoding_settings(tokenizer):
    """A model whose preset decodes with the guard translates as with the guard passed by hand;
    a call may turn it off, and greedy decoding or another constraint goes without it."""
    from keras_transformer.decoding.constraints import BracketConstraint
    from keras_transformer.decoding.repetition import with_guard
    from keras_transformer.decoding.settings import DecodingSettings

    model = tiny_transformer(tokenizer.vocab_size, num_layers=1)
    plain = Translator(model, tokenizer, decoding=DecodingSettings(beam_size=2, max_length_offset=12))
    guarded = Translator(model, tokenizer, decoding=DecodingSettings(beam_size=2, max_length_offset=12,
                                                                     repetition_guard=4))
    vocab = model.config.target_vocab_size
    guard = with_guard(guarded.decoding, vocab)
    assert isinstance(guard, RepetitionGuard) and guard.max_period == 4
    assert with_guard(guarded.decoding, vocab) is guard  # one object: the search is traced once
    sentences = ["Shows the current weather.", "This package contains the development files."]
    assert guarded.translate(sentences) == plain.translate(sentences, constraint=guard)
    assert guarded.translate(sentences, repetition_guard=0) == plain.translate(sentences)
    assert with_guard(guarded.decoding, vocab, greedy=True) is None
    other = BracketConstraint.__new__(BracketConstraint)
    assert with_guard(guarded.decoding, vocab, other) is other
    with pytest.raises(ValueError, match="repetition_guard needs beam search"):
        plain.translate(sentences, greedy=True, repetition_guard=4)


class RecordingTokenizer:
    """A tokenizer that keeps the id rows it detokenizes."""

    def __init__(self, tokenizer):
        self._tokenizer, self.rows = tokenizer, []

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def detokenize(self, ids):
        self.rows += ids.numpy().tolist()
        return self._tokenizer.detokenize(ids)
