"""Word alignment for sequence-to-sequence parsing: the decoder is told which word comes next.

A linearised tree (section 6.3; Vinyals et al. 2015) holds one slot per word, in order:
``(S (NP NNP NNP )NP (VP VBZ ... )VP . )S``. Before each target token the number of slots written
so far is the index of the next word to be covered, so a parser never has to learn that counting
alignment through attention; with ~3k training trees it does not (tagging accuracy 16% after an
hour). Liu, Zhu & Shi (2018, "Improving Sequence-to-Sequence Constituency Parsing", deterministic
attention) give the decoder the encoder state of the current word; this layer does the same by
addition: at target position ``t`` the decoder input gets ``W h_j``, where ``h_j`` is the encoder
output at the first subword piece of word ``j = (slots among target inputs 0..t)`` and ``W`` a
learned ``d_model x d_model`` projection. Once
every word is covered ``h_j`` is zero, which tells the decoder that only closing brackets remain.

The same index is computed in training (teacher forcing, :meth:`WordAlignment.pointer` over the
whole shifted target) and in incremental decoding (the running slot count is part of the decoder
cache and follows the beams), and it is the count the bracket constraint keeps
(:class:`~keras_transformer.decoding.constraints.BracketConstraint`: slots left = words - slots written).

With ``tagger: fused`` the layer also classifies each word's encoder state into a slot token (its
POS tag), the tagger head of multi-task parsers (Vinyals et al. 2015 drop tags from the tree; here
the tag is the word's, predicted from its state): trained beside the decoder (:func:`tagging_loss`),
which pushes the encoder to hold each word's category, its logits are also added to the decoder's
at every step, a direct path from the current word to its tag.

Word starts are the source pieces SentencePiece marks with ``▁`` (it never merges across
whitespace); slots are the target pieces that are neither brackets nor special tokens. Both are
id lists in the model's config (:func:`alignment_ids` reads them off the tokenizers).
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
from keras import ops

from keras_transformer.training.losses import label_smoothed_nll

WORD_BOUNDARY = "\u2581"
SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")


def _indicator(ids: Sequence[int], size: int) -> np.ndarray:
    table = np.zeros([size], np.int32)
    table[np.asarray(list(ids), np.int64)] = 1
    return table


def alignment_ids(source_tokenizer, target_tokenizer) -> dict[str, list[int]]:
    """``{"word_start_ids": ..., "slot_ids": ...}`` of a source and a target vocabulary.

    Word starts: source pieces beginning with ``▁`` (special ids excluded). Slots: target pieces
    that, without a leading ``▁``, are non-empty and start with neither ``(`` nor ``)``: the POS
    tags of a linearised tree (:mod:`pipelines.tasks.parsing.linearize`).
    """

    def pieces(tokenizer):
        return [(i, piece) for i, piece in enumerate(tokenizer.pieces())
                if i not in tokenizer.special_ids and piece not in SPECIAL_PIECES]

    starts = [i for i, piece in pieces(source_tokenizer) if piece.startswith(WORD_BOUNDARY)]
    slots = [i for i, piece in pieces(target_tokenizer)
             if piece.lstrip(WORD_BOUNDARY) and piece.lstrip(WORD_BOUNDARY)[0] not in "()"]
    if not starts or not slots:
        raise ValueError(f"word alignment needs word-start source pieces ({len(starts)} found) and slot "
                         f"target pieces ({len(slots)} found)")
    return {"word_start_ids": starts, "slot_ids": slots}


@keras.saving.register_keras_serializable(package="keras_transformer")
class WordAlignment(keras.layers.Layer):
    """The encoder state of the next word to cover, projected, for the decoder's input.

    Args:
        word_start_ids: source ids of pieces that begin a word.
        slot_ids: target ids of slot tokens (one per word).
        source_vocab_size, target_vocab_size: vocabulary sizes (the tables' lengths).
        tagger: ``none`` or ``fused`` (module docstring).
        word_pieces: a word's state is its ``first`` piece's, or the ``mean`` of its pieces' (the
            suffix of a word the tagger has not seen tells its tag); ``special_ids`` (pad, BOS,
            EOS) belong to no word.

    ``build(word_states_shape, pointer_shape)`` is named after ``call(word_states, pointer)``: Keras
    records a layer's build shapes by its call arguments (``{name}_shape``) and a loaded model
    rebuilds it with them, so a ``build(input_shape)`` would fail to load a model that built the
    layer by calling it.
    """

    def __init__(self, word_start_ids, slot_ids, source_vocab_size: int, target_vocab_size: int,
                 tagger: str = "none", word_pieces: str = "first", special_ids=(0, 2, 3), **kwargs):
        super().__init__(**kwargs)
        self.tagger = tagger
        self.word_pieces = word_pieces
        self.special_ids = [int(i) for i in special_ids]
        self.word_start_ids = [int(i) for i in word_start_ids]
        self.slot_ids = [int(i) for i in slot_ids]
        self.source_vocab_size = int(source_vocab_size)
        self.target_vocab_size = int(target_vocab_size)
        for name, ids, size in (("word_start_ids", self.word_start_ids, self.source_vocab_size),
                                ("slot_ids", self.slot_ids, self.target_vocab_size)):
            if not ids or min(ids) < 0 or max(ids) >= size:
                raise ValueError(f"Invalid Transformer setting `{name}`: needs ids in [0, {size}), got "
                                 f"{len(ids)} ids" + (f" from {min(ids)} to {max(ids)}" if ids else ""))
        self._word_start_table = _indicator(self.word_start_ids, self.source_vocab_size)
        self._slot_table = _indicator(self.slot_ids, self.target_vocab_size)
        self._special_table = _indicator(self.special_ids, self.source_vocab_size)
        self.projection = self.tag_projection = None

    def build(self, word_states_shape, pointer_shape=None):
        # Named after call()'s arguments, as Keras requires of a build() with more than one: a
        # loaded model rebuilds the layer with build(word_states_shape=..., pointer_shape=...).
        d_model = word_states_shape[-1]
        self.projection = keras.layers.Dense(d_model, use_bias=False, dtype=self.dtype_policy, name="projection")
        self.projection.build((None, None, d_model))
        if self.tagger != "none":
            self.tag_projection = keras.layers.Dense(self.target_vocab_size, dtype=self.dtype_policy, name="tagger")
            self.tag_projection.build((None, None, d_model))
        self.built = True

    def word_states(self, source_ids, encoder_outputs):
        """``[batch, source_length, d_model]``: row ``w`` is word ``w``'s state (``word_pieces``),
        zero past the sentence's last word."""
        source_ids = ops.cast(source_ids, "int32")
        starts = ops.take(ops.convert_to_tensor(self._word_start_table), source_ids)
        word_of_piece = ops.cumsum(starts, axis=1) - 1
        length = ops.shape(source_ids)[1]
        member = ops.cast(starts, "bool")
        if self.word_pieces == "mean":
            special = ops.take(ops.convert_to_tensor(self._special_table), source_ids)
            member = ops.logical_and(ops.equal(special, 0), word_of_piece >= 0)
        select = ops.cast(ops.logical_and(
            ops.equal(word_of_piece[:, None, :], ops.arange(length, dtype="int32")[None, :, None]),
            member[:, None, :]), encoder_outputs.dtype)
        if self.word_pieces == "mean":
            select = select / ops.maximum(ops.sum(select, axis=-1, keepdims=True), 1.0)
        return ops.matmul(select, encoder_outputs)

    def pointer(self, target_ids, slots_before=None):
        """Word index per target input position, and the slot count after the last position.

        Position ``t`` points at ``slots_before`` + the number of slots among ``target_ids[:, :t+1]``
        (BOS is no slot): the word the next slot will cover.
        """
        pointer = ops.cumsum(self.is_slot(target_ids), axis=1)
        if slots_before is not None:
            pointer = pointer + ops.cast(slots_before, "int32")[:, None]
        return pointer, pointer[:, -1]

    def is_slot(self, target_ids):
        """int32, 1 where a target id is a slot (stands for a word)."""
        return ops.take(ops.convert_to_tensor(self._slot_table), ops.cast(target_ids, "int32"))

    @staticmethod
    def aligned(word_states, pointer):
        """``[batch, target_length, d_model]``: each position's word state (zero once the pointer is
        past the last word: those rows of ``word_states`` are zero)."""
        select = ops.one_hot(pointer, ops.shape(word_states)[1], dtype=word_states.dtype)
        return ops.matmul(select, word_states)

    def call(self, word_states, pointer):
        """The projected :meth:`aligned` states, added to the decoder's inputs."""
        return self.projection(self.aligned(word_states, pointer))

    def tag_logits(self, word_states, pointer):
        """``[batch, target_length, target_vocab]`` float32: the tagger's logits for each position's word."""
        return ops.cast(self.tag_projection(self.aligned(word_states, pointer)), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(word_start_ids=self.word_start_ids, slot_ids=self.slot_ids,
                      source_vocab_size=self.source_vocab_size, target_vocab_size=self.target_vocab_size,
                      tagger=self.tagger, word_pieces=self.word_pieces, special_ids=self.special_ids)
        return config


def tagging_loss(alignment: WordAlignment, word_states, target_in, target_out, label_smoothing=0.0, pad_id=0):
    """Sum of the tagger's smoothed cross-entropy over the slot tokens of ``target_out``.

    Position ``t``'s word is the pointer over ``target_in`` (teacher forcing), the word the slot
    ``target_out[t]`` covers, as in decoding.
    """
    pointer, _ = alignment.pointer(target_in)
    logits = alignment.tag_logits(word_states, pointer)
    losses, _ = label_smoothed_nll(target_out, logits, label_smoothing, pad_id)
    return ops.sum(losses * ops.cast(alignment.is_slot(target_out), "float32"))
