"""Text as the model sees it: normalised, and with the parts no one translates held aside.

:func:`normalize` is the corpus cleaning's normalisation, run in the graph, so that every entry
point (training, a translator, its export) sees text as training did.

Verbatim spans (URLs, e-mail addresses, file paths) are copied into a translation, not
translated: a German description keeps ``https://example.org/doc/`` and ``/usr/share/doc/foo``
as they are. A model that writes them piece by piece from a few thousand subwords gets them
wrong and, on a rare one, loops ("…/656/656/unde/unde/…" in the demo's output). With a
tokenizer trained with the setting ``verbatim`` each span becomes one placeholder piece
(:data:`VERBATIM`) on both sides of training and in every source; the decoders put the source's
spans back into the output's placeholders, in order (:func:`restore`). The paper's subword
vocabulary (section 5.1) stays as it is for everything else.

Every function here is a TensorFlow op, so a Translator and its SavedModel export do the same.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

#: What Python's ``str.split()`` splits on (``str.isspace``), in RE2 syntax (RE2's ``\s`` lacks some).
_WHITESPACE = (r"[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
               r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]+")

#: The placeholder piece of a verbatim span: a private-use character, which no text carries.
VERBATIM = "\ue000"

# A span starts at the text's start or after a character that cannot continue a word, an address
# or a path (RE2 has no look-behind, so that character is matched and put back as group 1).
_BEFORE = r"(^|[^\p{L}\p{N}_/@.~+-])"
_URL = r"(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.)[^\s<>\"'«»“”]*[^\s<>\"'«»“”.,;:!?)\]]"
_EMAIL = r"[\p{L}\p{N}_.+-]+@[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)+"
# An absolute or home path of at least two parts ("/usr/bin", "~/.config/"), not "and/or",
# "TCP/IP" or "1/2"; a full stop or comma after it ends the sentence, not the path.
_PATH = r"~?/[\p{L}\p{N}_.+-]+/(?:[\p{L}\p{N}_.+/-]*[\p{L}\p{N}_+/-])?"
_SPAN = _BEFORE + "(" + "|".join((_URL, _EMAIL, _PATH)) + ")"
#: ``normalize`` leaves no line break in a string, so one can mark the spans.
_MARK = "\n"


def normalize(strings: tf.Tensor) -> tf.Tensor:
    """In-graph NFKC normalisation and whitespace collapse: ``" ".join(nfkc(s).split())``.

    The same normalisation as the corpus cleaning's (``pipelines.tasks.translation.cleaning.normalize_text``), so
    that every entry point, including an exported SavedModel, sees text the way training did.
    """
    return one_line(tf_text.normalize_utf8(strings, "NFKC"))


def one_line(text: tf.Tensor) -> tf.Tensor:
    """Every run of whitespace (line breaks included) as one space, none at either end.

    A model can write any piece, a vertical tab or a line break too. An output is scored as one
    line of a file, which strips and splits on them; normalising here, in the graph, makes the
    string a user gets from a translator or its export the one that was scored.
    """
    text = tf.strings.regex_replace(text, _WHITESPACE, " ")
    return tf.strings.regex_replace(text, r"^ | $", "")


def protect(texts) -> tf.Tensor:
    """Normalised ``tf.string`` texts with every verbatim span replaced by :data:`VERBATIM`."""
    return tf.strings.regex_replace(tf.convert_to_tensor(texts, tf.string), _SPAN, "\\1" + VERBATIM)


def verbatim_spans(texts) -> tf.RaggedTensor:
    """The verbatim spans of normalised texts, in order: ``tf.string [batch, (spans)]``."""
    marked = tf.strings.regex_replace(tf.convert_to_tensor(texts, tf.string), _SPAN,
                                      f"\\1{_MARK}\\2{_MARK}")
    parts = tf.strings.split(marked, _MARK)
    # Marked text alternates text, span, text, ...: the spans are the odd parts.
    odd = tf.math.floormod(tf.ragged.range(parts.row_lengths()), 2) == 1
    return tf.ragged.boolean_mask(parts, odd)


def restore(texts, spans: tf.RaggedTensor) -> tf.Tensor:
    """``texts`` (``tf.string [batch]``, a model's output) with their placeholders replaced by
    ``spans`` (``[batch, (spans)]``, the source's) in order, each result :func:`one_line`.

    A placeholder beyond the source's spans is dropped; spans the output has no placeholder for
    are appended at its end, since a URL out of place serves a reader better than none.
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    parts = tf.strings.split(texts, VERBATIM)  # k placeholders: k + 1 parts
    slots = parts.row_lengths() - 1
    column = tf.ragged.range(parts.row_lengths())
    rows, columns = column.value_rowids(), column.flat_values
    # One empty column more than the widest row: a placeholder beyond the spans reads "".
    padded = tf.concat([spans.to_tensor(default_value=""), tf.fill(tf.stack([spans.nrows(), 1]), "")], axis=1)
    columns_in = tf.minimum(columns, tf.cast(tf.shape(padded, out_type=tf.int64)[1] - 1, columns.dtype))
    fill = tf.gather_nd(padded, tf.stack([rows, columns_in], axis=1))
    left_over = tf.ragged.range(spans.row_lengths()) >= tf.expand_dims(slots, 1)
    tail = tf.strings.reduce_join(tf.ragged.boolean_mask(spans, left_over), axis=1, separator=" ")
    tail = tf.where(tail == "", tail, " " + tail)
    fill = tf.where(columns == tf.gather(slots, rows), tf.gather(tail, rows), fill)
    # Part, its fill, part, its fill...: the same row splits, twice as long.
    joined = tf.reshape(tf.stack([parts.flat_values, fill], axis=1), [-1])
    rows_joined = tf.RaggedTensor.from_row_splits(joined, parts.row_splits * 2)
    return one_line(tf.strings.reduce_join(rows_joined, axis=1))
