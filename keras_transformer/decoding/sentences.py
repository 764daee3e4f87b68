"""Paragraphs translated sentence by sentence, the translations joined with a space.

The paper translates single sentences (newstest, section 6.1). A paragraph of several sentences,
such as a Debian package description, is a longer input than most training pairs: a model trained
on paragraphs of up to ``max_length`` pieces stopped early on the longer ones (length ratio 0.5-0.6
for sources of more than 80 words) and lost whole sentences in between. Split into sentences, each
part is an input of the kind the model saw most (``cpu-small-sentence-split-2026-11-27.json``).

Both functions are TensorFlow ops, so a :class:`~keras_transformer.decoding.translator.Translator`
and its export (:mod:`keras_transformer.decoding.export`) split and join in exactly the same way.
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.tokenizer import normalize

#: A sentence ends in ``.``, ``!`` or ``?`` (a closing bracket or quote may follow) after three
#: letters or digits (not "Jr.", "e.g.", "1.5") or a closing bracket or quote, and the next
#: begins with a capital, a digit, a quote or an opening bracket, after a space.
_BOUNDARY = r"([\p{L}\p{N}]{3}|[\p{L}\p{N}][)\]\"'»”])([.!?][)\]\"'»”]?) +([\p{Lu}\p{N}\"'(\[«“])"
#: ``normalize`` leaves no line break in a string, so one can mark the boundaries.
_MARK = "\n"


def split_sentences(texts) -> tf.RaggedTensor:
    """``tf.string [batch]`` -> ``tf.string RaggedTensor [batch, (sentences)]``.

    The text is normalised as the tokenizer normalises it (NFKC, whitespace collapsed), so the
    sentences carry no leading or trailing space; a text without a boundary is one sentence.
    """
    texts = normalize(tf.convert_to_tensor(texts, tf.string))
    marked = tf.strings.regex_replace(texts, _BOUNDARY, "\\1\\2" + _MARK + "\\3")
    return tf.strings.split(marked, _MARK)


def join_sentences(translations, row_splits) -> tf.Tensor:
    """The translations of :func:`split_sentences`' flat values -> one string per paragraph."""
    rows = tf.RaggedTensor.from_row_splits(tf.convert_to_tensor(translations, tf.string), row_splits)
    return tf.strings.reduce_join(rows, axis=1, separator=" ")
