"""Words spelled from their pieces (keras_transformer/layers/word_characters.py)."""

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.layers.word_characters import BEGIN, END, MAX_WORD_CHARS, WordCharacters, character_table

PIECES = ["<pad>", "<unk>", "<s>", "</s>", "\u2581the", "\u2581walk", "ing", "\u2581dog", "s", "\u2581a",
          "\u2581" + "x" * 40]
SPECIAL = (0, 1, 2, 3)


def _spelling(layer, source):
    """What ``SpanParser.word_index`` gives the layer: pieces 4, 5, 7, 9, 10 begin a word."""
    source = np.asarray(source, np.int32)
    starts = np.isin(source, [4, 5, 7, 9, 10]).astype(np.int32)
    word_of_piece = np.cumsum(starts, axis=1) - 1
    member = (source > 3) & (word_of_piece >= 0)
    return word_of_piece.astype(np.int32), member, starts.sum(axis=1).astype(np.int32)


def _decode(row, pieces=PIECES):
    chars, _, _ = character_table(pieces, SPECIAL)
    alphabet = {int(i): c for p, ids in zip(pieces, chars) for c, i in zip(p.lstrip("\u2581"), ids)}
    return "".join({BEGIN: "<", END: ">", 0: ""}.get(int(i), alphabet.get(int(i), "?")) for i in row)


def test_the_character_table_is_the_vocabulary_s_spelling():
    chars, lengths, num_chars = character_table(PIECES, SPECIAL)
    assert lengths.tolist() == [0, 0, 0, 0, 3, 4, 3, 3, 1, 1, 40]
    assert num_chars == END + 1 + len(set("thewalkingdogsax"))
    # Sorted characters after the marks: a fact of the vocabulary, not of the pieces' order.
    alphabet = sorted(set("thewalkingdogsax"))
    assert chars[4, :3].tolist() == [END + 1 + alphabet.index(c) for c in "the"] and chars[0].max() == 0


def test_words_are_spelled_from_their_pieces_with_boundary_marks():
    layer = WordCharacters(PIECES, units=8, char_dim=4, special_ids=SPECIAL)
    # "the walking dogs", EOS, padding | "a dog", EOS, padding.
    source = [[4, 5, 6, 7, 8, 3, 0], [9, 7, 3, 0, 0, 0, 0]]
    grid = np.asarray(layer.spell(source, *_spelling(layer, source)))
    assert grid.shape == (2, 3, len("walking") + 2)
    assert [_decode(row) for row in grid[0]] == ["<the>", "<walking>", "<dogs>"]
    assert [_decode(row) for row in grid[1]] == ["<a>", "<dog>", ""]


def test_a_dropped_piece_leaves_its_word_without_those_letters_and_long_words_are_cut():
    layer = WordCharacters(PIECES, units=8, char_dim=4, special_ids=SPECIAL)
    source, read = [[4, 5, 6, 10, 3]], [[4, 5, 1, 10, 3]]   # "ing" dropped to <unk>
    grid = np.asarray(layer.spell(read, *_spelling(layer, source)))
    assert grid.shape[-1] == MAX_WORD_CHARS
    assert [_decode(row) for row in grid[0]] == ["<the>", "<walk>", "<" + "x" * (MAX_WORD_CHARS - 2) + ">"]


def test_a_word_s_vector_does_not_depend_on_its_batch():
    layer = WordCharacters(PIECES, units=8, char_dim=4, special_ids=SPECIAL)
    layer.build()
    alone = [[9, 7, 3]]
    beside = [[9, 7, 3, 0, 0, 0], [4, 5, 6, 7, 8, 3]]   # a longer word widens the grid
    a = np.asarray(layer(np.asarray(alone, np.int32), *_spelling(layer, alone)))
    b = np.asarray(layer(np.asarray(beside, np.int32), *_spelling(layer, beside)))
    assert a.shape == (1, 2, 8) and b.shape == (2, 3, 8)
    np.testing.assert_allclose(b[0, :2], a[0], atol=1e-6)
    assert not np.allclose(b[1, 1], b[1, 2], atol=1e-4)   # "walking" and "dogs" differ


def test_config_round_trip():
    layer = WordCharacters(PIECES, units=8, char_dim=4, kernel_size=2, special_ids=SPECIAL, name="spelling")
    copy = WordCharacters.from_config(layer.get_config())
    assert copy.get_config() == layer.get_config() and copy.num_chars == layer.num_chars
    assert keras.saving.get_registered_object("keras_transformer>WordCharacters") is WordCharacters


def test_a_batch_without_words_gives_an_empty_result():
    # Keras's harness feeds random lengths of 0, 1 or 2: both 0 once crashed the gather and the
    # convolution. A batch of empty sentences has no words to read, eagerly and in a graph.
    layer = WordCharacters(PIECES, units=8, char_dim=4, special_ids=SPECIAL)
    empty = [[3, 0, 0], [3, 0, 0]]
    inputs = (np.asarray(empty, np.int32), *_spelling(layer, empty))
    assert inputs[-1].tolist() == [0, 0]
    assert np.asarray(layer(*inputs)).shape == (2, 0, 8)
    assert tf.function(layer)(*inputs).shape == (2, 0, 8)
