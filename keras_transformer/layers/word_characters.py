"""Words read from their spelling: a character CNN over each word, rebuilt from its subword pieces.

Kitaev & Klein (2018, section 5.1) feed their parser's encoder a character-level representation
of each word (a BiLSTM over its characters), which is what lets a parser tag words it never saw
in training from their shape (``-ing``, ``-ly``, capitals, digits, hyphens). Section 3.1's encoder
reads subword pieces, whose ids say nothing about the letters two different pieces share, so a
word's spelling is rebuilt here from its pieces' strings, inside the model (the model's input
stays the piece ids): each word becomes ``BEGIN c_1 .. c_k END``, read by a convolution and
max-pooled over its characters (the character CNN of Ma & Hovy 2016; cheaper than an LSTM on a
CPU; the boundary marks let the filters see prefixes and suffixes).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import keras
import numpy as np
from keras import ops

from keras_transformer.layers.word_alignment import WORD_BOUNDARY

#: Marks around every word's characters; 0 is padding.
PAD, BEGIN, END = 0, 1, 2
#: A word longer than this (with its two marks) is read from its first characters only.
MAX_WORD_CHARS = 32


def character_table(pieces: Sequence[str], special_ids: Collection[int] = ()) -> tuple[np.ndarray, np.ndarray, int]:
    """``(chars [vocab, longest], lengths [vocab], num_chars)``: each piece's characters as ids.

    A piece's characters are its string without SentencePiece's leading ``▁``; special pieces
    (``special_ids`` and ``<...>`` pieces) have none. Character ids are the characters' sorted
    order after ``PAD``, ``BEGIN`` and ``END``, so the table is a fact of the vocabulary alone.
    """
    texts = ["" if i in special_ids or (p.startswith("<") and p.endswith(">")) else p.lstrip(WORD_BOUNDARY)
             for i, p in enumerate(pieces)]
    alphabet = {c: END + 1 + k for k, c in enumerate(sorted(set("".join(texts))))}
    longest = max(1, max(len(t) for t in texts))
    chars = np.zeros([len(texts), longest], np.int32)
    for i, text in enumerate(texts):
        chars[i, : len(text)] = [alphabet[c] for c in text]
    return chars, np.array([len(t) for t in texts], np.int32), END + 1 + len(alphabet)


def word_membership(word_of_piece, member, num_words):
    """``[batch, num_words, pieces]`` bool: piece ``p`` belongs to word ``w`` (``member`` marks the
    pieces that belong to any word; ``word_of_piece`` says which)."""
    words = ops.arange(num_words, dtype="int32")[None, :, None]
    return ops.logical_and(ops.equal(word_of_piece[:, None, :], words), member[:, None, :])


@keras.saving.register_keras_serializable(package="keras_transformer")
class WordCharacters(keras.layers.Layer):
    """``[batch, words, units]``: each word's spelling, read from the pieces it is made of.

    Args:
        pieces: the source vocabulary's pieces, by id (``SubwordTokenizer.pieces()``).
        units: the output width (the encoder's ``d_model``).
        char_dim: the width of a character's embedding; the convolution has ``4 * char_dim``
            filters of width ``kernel_size``.
        special_ids: ids of the special pieces (no characters).

    Call with ``piece_ids`` ``[batch, pieces]`` (the ids the encoder reads: a piece dropped to
    ``<unk>`` has no characters), ``word_of_piece`` (the word each piece belongs to), ``member``
    (whether it belongs to one: not padding, not EOS) and ``lengths`` (each sentence's words).
    """

    def __init__(self, pieces: Sequence[str], units: int, char_dim: int = 32, kernel_size: int = 3,
                 special_ids: Collection[int] = (), **kwargs):
        super().__init__(**kwargs)
        self.pieces, self.units, self.char_dim, self.kernel_size = list(pieces), units, char_dim, kernel_size
        self.special_ids = sorted(int(i) for i in special_ids)
        self._chars, self._lengths, self.num_chars = character_table(self.pieces, self.special_ids)
        self.embedding = keras.layers.Embedding(self.num_chars, char_dim, dtype=self.dtype_policy,
                                                name="char_embedding")
        self.convolution = keras.layers.Conv1D(4 * char_dim, kernel_size, padding="same", activation="relu",
                                               dtype=self.dtype_policy, name="char_convolution")
        self.projection = keras.layers.Dense(units, dtype=self.dtype_policy, name="char_projection")
        # At initialisation the projection's output is ~40x smaller than the unit-scale piece
        # embeddings it is added to (section 3.4's scaling); normalised, the spelling counts from
        # the first update.
        self.norm = keras.layers.LayerNormalization(epsilon=1e-6, dtype=self.dtype_policy, name="char_norm")

    def build(self, piece_ids_shape=None, word_of_piece_shape=None, member_shape=None, lengths_shape=None):
        # Named after call()'s arguments, as Keras requires of a build() with more than one: a
        # loaded model rebuilds the layer with them. The sizes come from the settings alone.
        self.embedding.build((None, None))
        self.convolution.build((None, None, self.char_dim))
        self.projection.build((None, None, 4 * self.char_dim))
        self.norm.build((None, None, self.units))
        self.built = True

    def spell(self, piece_ids, word_of_piece, member, lengths):
        """``[batch, words, width]`` character ids: ``BEGIN``, the word's pieces' characters, ``END``,
        then padding; ``width`` is the batch's longest word plus 2, at most :data:`MAX_WORD_CHARS`."""
        piece_ids = ops.cast(piece_ids, "int32")
        member = ops.cast(member, "bool")
        n = ops.max(lengths)
        chars = ops.take(ops.convert_to_tensor(self._chars), piece_ids, axis=0)               # [b, S, P]
        piece_lengths = ops.take(ops.convert_to_tensor(self._lengths), piece_ids) * ops.cast(member, "int32")
        in_word = word_membership(word_of_piece, member, n)                                   # [b, n, S]
        word_lengths = ops.sum(ops.cast(in_word, "int32") * piece_lengths[:, None, :], axis=2)  # [b, n]
        # A piece's first character sits after its word's earlier pieces' characters: the running
        # count over the sentence minus the count before its word.
        before_piece = ops.cumsum(piece_lengths, axis=1) - piece_lengths
        before_word = ops.cumsum(word_lengths, axis=1) - word_lengths
        # A spare zero column keeps the gather valid when no sentence of the batch has a word.
        before_word = ops.pad(before_word, [[0, 0], [0, 1]])
        offset = before_piece - ops.take_along_axis(before_word, ops.clip(word_of_piece, 0, n), axis=1)
        width = ops.minimum(ops.max(word_lengths, initial=0) + 2, MAX_WORD_CHARS)
        longest = ops.shape(chars)[2]
        k = ops.arange(longest, dtype="int32")[None, None, :]
        position = offset[:, :, None] + 1 + k
        keep = ops.logical_and(ops.logical_and(k < piece_lengths[:, :, None], position < width - 1), member[:, :, None])
        # Characters not kept go to a spare row and column, cut off after the scatter.
        batch = ops.shape(chars)[0]
        rows = ops.broadcast_to(ops.arange(batch, dtype="int32")[:, None, None], ops.shape(chars))
        words = ops.where(keep, ops.broadcast_to(word_of_piece[:, :, None], ops.shape(chars)), n)
        columns = ops.where(keep, position, width)
        indices = ops.reshape(ops.stack([rows, words, columns], axis=-1), (-1, 3))
        grid = ops.scatter(indices, ops.reshape(chars, (-1,)), (batch, n + 1, width + 1))[:, :n, :width]
        real = ops.cast(ops.arange(n, dtype="int32")[None, :] < lengths[:, None], "int32")[:, :, None]
        marks = (BEGIN * ops.one_hot(ops.zeros_like(word_lengths), width, dtype="int32")
                 + END * ops.one_hot(ops.minimum(word_lengths + 1, width - 1), width, dtype="int32"))
        return grid + real * marks

    def call(self, piece_ids, word_of_piece, member, lengths):
        grid = self.spell(piece_ids, word_of_piece, member, lengths)
        batch, n, width = ops.shape(grid)[0], ops.shape(grid)[1], ops.shape(grid)[2]
        # One spare empty word per sentence, cut off at the end: the convolution never sees an
        # empty batch, which TensorFlow's Conv1D cannot take (a batch of sentences without words).
        flat = ops.reshape(ops.pad(grid, [[0, 0], [0, 1], [0, 0]]), (-1, width))
        present = ops.not_equal(flat, PAD)[:, :, None]
        # Padding reads as zeros, what the convolution pads the grid's edge with: a word's features
        # do not depend on the longest word of its batch.
        embedded = self.embedding(flat)
        features = self.convolution(ops.where(present, embedded, ops.zeros_like(embedded)))
        pooled = ops.max(ops.where(present, features, ops.zeros_like(features)), axis=1)  # ReLU: >= 0
        return ops.reshape(self.norm(self.projection(pooled)), (batch, n + 1, self.units))[:, :n]

    def get_config(self):
        config = super().get_config()
        config.update(pieces=self.pieces, units=self.units, char_dim=self.char_dim, kernel_size=self.kernel_size,
                      special_ids=self.special_ids)
        return config
