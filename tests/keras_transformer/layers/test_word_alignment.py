"""Word alignment: the decoder is told which word comes next, the same way in training and decoding."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer
from keras_transformer.decoding.beam import beam_search_decode
from keras_transformer.decoding.constraints import BracketConstraint
from keras_transformer.decoding.greedy import greedy_decode
from keras_transformer.layers.word_alignment import alignment_ids, tagging_loss

# Source: 4..11 begin a word, 12..19 continue one. Target: 4..9 slots (tags), 10..15 brackets.
WORD_STARTS, SLOTS = list(range(4, 12)), list(range(4, 10))
OPEN, CLOSE = [10, 11, 12], [13, 14, 15]
EOS, BOS, PAD = 3, 2, 0


def model_with_alignment(**overrides):
    settings = dict(source_vocab_size=20, target_vocab_size=16, share_embeddings=False, num_layers=1,
                    d_model=16, num_heads=2, d_ff=32, dropout=0.0, word_alignment=True,
                    word_start_ids=WORD_STARTS, slot_ids=SLOTS)
    model = Transformer(**{**settings, **overrides})
    model.build()
    return model


# Two sentences: 3 words (pieces 4 | 12 5 | 6 13... ) and 2 words, EOS-terminated, padded.
SOURCE = tf.constant([[4, 12, 5, 6, 13, 3, 0], [7, 8, 3, 0, 0, 0, 0]], tf.int32)
# "(S (NP t t )NP (VP t )VP )S" over 3 words, and "(S t t )S" over 2; BOS first, as decoder inputs.
TARGET_IN = tf.constant([[BOS, 10, 11, 4, 5, 14, 12, 6, 15], [BOS, 10, 7, 8, 13, 0, 0, 0, 0]], tf.int32)


def test_word_states_are_each_words_first_piece_and_zero_after_the_last():
    model = model_with_alignment()
    encoded = model.encode(SOURCE)
    states = model.word_states(SOURCE, encoded).numpy()
    np.testing.assert_allclose(states[0, :3], encoded.numpy()[0, [0, 2, 3]], rtol=1e-6)
    np.testing.assert_allclose(states[1, :2], encoded.numpy()[1, [0, 1]], rtol=1e-6)
    assert not states[0, 3:].any() and not states[1, 2:].any()


def test_mean_word_states_average_each_words_pieces_and_leave_out_eos_and_padding():
    model = model_with_alignment(word_pieces="mean")
    encoded = model.encode(SOURCE).numpy()
    states = model.word_states(SOURCE, tf.constant(encoded)).numpy()
    expected = [encoded[0, [0, 1]].mean(0), encoded[0, 2], encoded[0, [3, 4]].mean(0)]
    np.testing.assert_allclose(states[0, :3], np.stack(expected), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(states[1, :2], encoded[1, [0, 1]], rtol=1e-5, atol=1e-6)
    assert not states[0, 3:].any() and not states[1, 2:].any()
    with pytest.raises(ValueError, match="word_pieces"):
        model_with_alignment(word_pieces="last")


def test_the_word_index_is_the_same_in_training_and_in_constrained_decoding():
    """Teacher forcing points position t at the slots among inputs 0..t; decoding step by step
    keeps that count in its cache, and the bracket constraint's slots left are words minus it."""
    model = model_with_alignment()
    pointer, _ = model.word_alignment.pointer(TARGET_IN)
    expected = [[0, 0, 0, 1, 2, 2, 2, 3, 3], [0, 0, 1, 2, 2, 2, 2, 2, 2]]
    assert pointer.numpy().tolist() == expected

    encoded = model.encode(SOURCE)
    cache = model.init_cache(encoded, source_ids=SOURCE)
    constraint = BracketConstraint(16, SLOTS, OPEN, CLOSE, EOS)
    words = tf.constant([3, 2])
    state = constraint.initial_state(words)
    decoded, left = [], []
    for t in range(TARGET_IN.shape[1]):
        cache = model.decode(TARGET_IN[:, t : t + 1], encoded, model.padding_mask(SOURCE), cache=cache,
                             cache_index=t).cache
        state = constraint.update(state, TARGET_IN[:, t])
        decoded.append(cache["slots"].numpy())
        left.append((words - state["left"]).numpy())
    assert np.stack(decoded, 1)[0].tolist() == expected[0]
    assert np.stack(left, 1)[0].tolist() == expected[0]


@pytest.mark.parametrize("tagger, word_pieces", [("none", "first"), ("fused", "mean")])
def test_cached_decoding_equals_the_full_forward_pass(tagger, word_pieces):
    model = model_with_alignment(tagger=tagger, word_pieces=word_pieces)
    full = model((SOURCE, TARGET_IN)).numpy()
    encoded = model.encode(SOURCE)
    cache = model.init_cache(encoded, source_ids=SOURCE)
    steps = []
    for t in range(TARGET_IN.shape[1]):
        logits, cache, _ = model.decode(TARGET_IN[:, t : t + 1], encoded, model.padding_mask(SOURCE), cache=cache,
                                        cache_index=t)
        steps.append(logits[:, 0].numpy())
    np.testing.assert_allclose(np.stack(steps, 1), full, atol=1e-4)


def test_the_alignment_changes_what_the_decoder_sees():
    """Same weights, other word order in the source: with alignment the first slot's logits follow
    the word the pointer names (the alignment is wired, not decoration)."""
    model = model_with_alignment()
    swapped = tf.constant([[6, 13, 5, 4, 12, 3, 0], [8, 7, 3, 0, 0, 0, 0]], tf.int32)
    a = model((SOURCE, TARGET_IN)).numpy()
    b = model((swapped, TARGET_IN)).numpy()
    assert np.abs(a - b).max() > 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_and_beam_search_decode_an_aligned_model_and_the_cache_follows_the_beams(seed):
    # Fixed weights: an untrained model may open brackets until the length limit cuts it, and only
    # a hypothesis that ended (EOS) is a tree; the limit here leaves room for these two sentences.
    # (Not keras.utils.set_random_seed: it would reset the suite's SentencePiece tokenizers.)
    model = model_with_alignment()
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0.0, 0.05, w.shape).astype(w.dtype) for w in model.get_weights()])
    greedy = greedy_decode(model, SOURCE, 6)
    beam = beam_search_decode(model, SOURCE, 1, 0.0, 30, constraint=BracketConstraint(16, SLOTS, OPEN, CLOSE, EOS),
                              slots=[3, 2])
    assert greedy.ids.shape[0] == 2
    # A constrained beam of one writes exactly one slot per word, and ends only then.
    ended = 0
    for row, words in enumerate([3, 2]):
        ids = beam.ids.numpy()[row, 0][: int(beam.lengths.numpy()[row, 0])]
        ended += int(ids[-1]) == EOS
        if int(ids[-1]) == EOS:
            assert sum(int(i) in SLOTS for i in ids) == words
        else:
            assert sum(int(i) in SLOTS for i in ids) <= words
    assert ended


@pytest.mark.parametrize("tagger, word_pieces", [("none", "first"), ("fused", "first"), ("fused", "mean")])
def test_config_round_trip_and_save_load(tmp_path, tagger, word_pieces):
    model = model_with_alignment(tagger=tagger, word_pieces=word_pieces)
    clone = Transformer.from_config(model.get_config())
    clone.build()
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone((SOURCE, TARGET_IN)), model((SOURCE, TARGET_IN)), atol=1e-6)
    model.save(tmp_path / "aligned.keras")
    loaded = keras.saving.load_model(tmp_path / "aligned.keras", compile=False)
    assert loaded.config == model.config
    np.testing.assert_allclose(loaded((SOURCE, TARGET_IN)), model((SOURCE, TARGET_IN)), atol=1e-6)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="word_start_ids"):
        Transformer(source_vocab_size=20, target_vocab_size=16, share_embeddings=False, word_alignment=True)
    with pytest.raises(ValueError, match="slot_ids"):
        model_with_alignment(slot_ids=[99])
    with pytest.raises(ValueError, match="tagger"):
        model_with_alignment(tagger="crf")
    with pytest.raises(ValueError, match=r"`tagger`='auxiliary': was removed \(it lost in every measurement"):
        model_with_alignment(tagger="auxiliary")
    with pytest.raises(ValueError, match="tagger.*word_alignment"):
        Transformer(source_vocab_size=20, target_vocab_size=16, share_embeddings=False, tagger="fused")


def test_the_tagger_scores_each_slot_against_its_own_word():
    """The tagging loss is the tagger's cross-entropy at the slots only, each slot read against the
    word the pointer names (word 0, 1, 2 for the first sentence's three slots)."""
    model = model_with_alignment(tagger="fused")
    target_out = tf.constant([[10, 11, 4, 5, 14, 12, 6, 15, EOS], [10, 7, 8, 13, EOS, 0, 0, 0, 0]], tf.int32)
    words = model.word_states(SOURCE, model.encode(SOURCE))
    logits = model.word_alignment.tag_projection(words).numpy()  # [batch, words, vocab]
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -(log_p[0, 0, 4] + log_p[0, 1, 5] + log_p[0, 2, 6] + log_p[1, 0, 7] + log_p[1, 1, 8])
    got = float(tagging_loss(model.word_alignment, words, TARGET_IN, target_out))
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_the_fused_tagger_adds_its_logits_for_each_positions_word():
    model = model_with_alignment(tagger="fused")
    words = model.word_states(SOURCE, model.encode(SOURCE))
    tags = model.word_alignment.tag_logits(words, model.word_alignment.pointer(TARGET_IN)[0]).numpy()
    fused = model((SOURCE, TARGET_IN)).numpy()
    for weight in model.word_alignment.tag_projection.weights:
        weight.assign(tf.zeros_like(weight))
    np.testing.assert_allclose(fused - model((SOURCE, TARGET_IN)).numpy(), tags, atol=1e-5)


def test_alignment_ids_read_the_vocabularies(tmp_path):
    import sentencepiece as spm

    from keras_transformer.tokenizer import SubwordTokenizer

    (tmp_path / "words.txt").write_text("the dog barks .\na cat sleeps on the mat .\n" * 30, "utf-8")
    (tmp_path / "trees.txt").write_text("(S (NP DT NN )NP (VP VBZ )VP . )S\n(NP DT NN )NP\n" * 30, "utf-8")
    for name, kind, size in (("words", "bpe", 30), ("trees", "word", 20)):
        spm.SentencePieceTrainer.train(input=str(tmp_path / f"{name}.txt"), model_prefix=str(tmp_path / name),
                                       model_type=kind, vocab_size=size, pad_id=0, unk_id=1, bos_id=2, eos_id=3,
                                       minloglevel=2, hard_vocab_limit=False)
    source, target = SubwordTokenizer(tmp_path / "words.model"), SubwordTokenizer(tmp_path / "trees.model")
    ids = alignment_ids(source, target)
    slots = {p.decode().lstrip("\u2581") for p in target.id_to_piece(ids["slot_ids"]).numpy()}
    assert slots == {"DT", "NN", "VBZ", "."}
    pieces = source.tokenize(["the dog sleeps on a mat ."]).to_list()[0]
    assert sum(piece in ids["word_start_ids"] for piece in pieces) == 7
