"""Paragraphs translated sentence by sentence and list item by list item, the translations joined.

The paper translates single sentences (newstest, section 6.1). A paragraph of several sentences,
such as a Debian package description, is a longer input than most training pairs: a model trained
on paragraphs of up to ``max_length`` pieces stopped early on the longer ones (length ratio 0.5-0.6
for sources of more than 80 words) and lost whole sentences in between. Split into sentences, each
part is an input of the kind the model saw most (``cpu-small-sentence-split-2026-11-27.json``).

Debian descriptions also write lists inline ("Main features: * fast * small"); a list is one
"sentence" to the sentence boundary, and the longest inputs with the most loops were such lists.
Each item is cut out as a sentence is, its bullet set aside, the item translated as a sentence and
the bullet put back (``list-items-2026-11-28.json``).

The functions are TensorFlow ops, so a :class:`~keras_transformer.decoding.translator.Translator`
and its export (:mod:`keras_transformer.decoding.export`) split and join in exactly the same way,
and the training stage cuts its sentence pairs with them (``pipelines.sentence_pairs``).
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from keras_transformer.tokenizer import normalize

#: A sentence ends in ``.``, ``!`` or ``?`` (a closing bracket or quote may follow) after three
#: letters or digits (not "Jr.", "e.g.", "1.5") or a closing bracket or quote, and the next
#: begins with a capital, a digit, a quote or an opening bracket, after a space.
_BOUNDARY = r"([\p{L}\p{N}]{3}|[\p{L}\p{N}][)\]\"'»”])([.!?][)\]\"'»”]?) +([\p{Lu}\p{N}\"'(\[«“])"
#: A list item begins with ``*`` between spaces after some text (``normalize`` has collapsed the
#: spaces and trimmed the ends, so something follows). Only ``*``: " - " is mostly a dash ("Courier
#: mail server - IMAP server").
_ITEM = r"(\S) (\* )"
#: A bullet at the start of a part, set aside while the item is translated.
_BULLET = r"^\* "
#: ``normalize`` leaves no line break in a string, so one can mark the boundaries.
_MARK = "\n"
#: Bumped when the split changes, so that the training caches cut by an older split are rebuilt.
SPLIT_VERSION = 2


def split_sentences(texts) -> tf.RaggedTensor:
    """``tf.string [batch]`` -> ``tf.string RaggedTensor [batch, (parts)]``: sentences and list items.

    The text is normalised as the tokenizer normalises it (NFKC, whitespace collapsed), so the parts
    carry no leading or trailing space; a list item keeps its bullet (``"* small"``; see
    :func:`split_bullets`); a text without a boundary is one part.
    """
    texts = normalize(tf.convert_to_tensor(texts, tf.string))
    marked = tf.strings.regex_replace(texts, _BOUNDARY, "\\1\\2" + _MARK + "\\3")
    marked = tf.strings.regex_replace(marked, _ITEM, "\\1" + _MARK + "\\2")
    return tf.strings.split(marked, _MARK)


def split_bullets(parts) -> tuple[tf.Tensor, tf.Tensor]:
    """``tf.string [n]`` parts -> their bullets (``"* "`` or ``""``) and their text without it."""
    parts = tf.convert_to_tensor(parts, tf.string)
    bodies = tf.strings.regex_replace(parts, _BULLET, "")
    return tf.where(bodies != parts, "* ", ""), bodies


def join_sentences(translations, row_splits) -> tf.Tensor:
    """The translations of :func:`split_sentences`' flat values -> one string per paragraph."""
    rows = tf.RaggedTensor.from_row_splits(tf.convert_to_tensor(translations, tf.string), row_splits)
    return tf.strings.reduce_join(rows, axis=1, separator=" ")


def translate_by_sentence(texts, translate: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    """``texts`` (``tf.string [batch]``) translated part by part by ``translate`` (``tf.string [n]`` ->
    ``tf.string [n]``, called once on every part of every text), each item's bullet put back."""
    parts = split_sentences(texts)
    bullets, bodies = split_bullets(parts.flat_values)
    return join_sentences(tf.strings.join([bullets, translate(bodies)]), parts.row_splits)
