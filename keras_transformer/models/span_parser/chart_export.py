"""Export a span parser as a TensorFlow SavedModel: the parser that ships is the parser scored.

The counterpart of :mod:`keras_transformer.decoding.export` for
:class:`~keras_transformer.models.span_parser.SpanParser`, the chart parser of Kitaev & Klein
(2018, "Constituency Parsing with a Self-Attentive Encoder") on section 3.1's encoder, which
writes its trees in section 6.3's linearised form. The SavedModel holds the weights, the
SentencePiece model (a ``tensorflow_text`` resource, the proto embedded) and the scoring graph:
tokenization, the source EOS and padding, the encoder, the span classifier and the tagger. Its
``serving_default`` signature maps ``sentences: tf.string [batch]`` to the span label
log-probabilities, the best tag ids and the number of words of each sentence; loading it needs
TensorFlow and ``tensorflow_text`` only::

    import tensorflow as tf, tensorflow_text  # noqa: F401
    parser = tf.saved_model.load(path)
    parser.signatures["serving_default"](sentences=tf.constant(["the package contains files ."]))

The CKY chart search and the writing of the tree stay outside the graph, in Python and NumPy
(:func:`~keras_transformer.models.span_parser.chart_parser.trees_of`): they are the very code
:class:`~keras_transformer.models.span_parser.chart_parser.ChartParser` runs when the evaluation scores the
parser, so :class:`ExportedChartParser`, which reads the signature's scores with the labels, tags
and bias recorded beside the graph, cannot decode other trees than the evaluation did. (A second
CKY written in TensorFlow ops would be a second implementation to keep in step.) Consumers load
it through :func:`keras_transformer.decoding.export.load_exported` like the seq2seq export.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf

from keras_transformer.decoding.formats import INPUT_NAME, METADATA_FILE, SIGNATURE_KEY
from keras_transformer.decoding.greedy import ensure_built
from keras_transformer.models.span_parser.chart_parser import (
    chart_record,
    sentence_scores,
    source_ids,
    span_scores,
    trees_of,
)

logger = logging.getLogger(__name__)

#: The metadata's ``kind`` of a span parser's export (the seq2seq export's is ``"translator"``).
KIND = "chart_parser"
#: The signature's outputs: span log-probabilities, tag ids, words per sentence.
OUTPUT_NAMES = ("spans", "tags", "words")


class ChartParserModule(tf.Module):
    """``tf.Module`` whose ``scores`` (once :meth:`trace` made it) maps a 1-D ``tf.string`` tensor to a
    span parser's scores."""

    def __init__(self, model, tokenizer, name: str = "chart_parser"):
        super().__init__(name=name)
        ensure_built(model)
        self.model = model
        self.source_tokenizer = tokenizer
        self._config = model.config

    def trace(self):
        """Traces ``scores`` once and sets it as the module's concrete function, which is also the serving
        signature: a ``tf.function`` is traced again by ``tf.saved_model.save`` in its own context."""
        self.scores = tf.function(self._scores, input_signature=[
            tf.TensorSpec([None], tf.string, name=INPUT_NAME)], autograph=False).get_concrete_function()
        return self.scores

    def _scores(self, sentences):
        """``spans``: float32 span label log-probabilities ``[batch, n + 1, n + 1, labels]``;
        ``tags``: int32 best tag ids ``[batch, n]`` (``n`` the batch's most words, entries past a
        sentence's words are padding); ``words``: int32 whitespace-separated words per sentence."""
        spans, tags = span_scores(self.model, source_ids(self.source_tokenizer, sentences, self._config))
        words = tf.cast(tf.strings.split(sentences).row_lengths(), tf.int32)
        return {"spans": spans, "tags": tags, "words": words}


def export_chart_parser(model, tokenizer, path) -> Path:
    """Writes a SavedModel scoring raw strings with the span parser ``model`` to ``path``.

    ``tokenizer`` is the source :class:`~keras_transformer.tokenizer.SubwordTokenizer`. The
    metadata file (``assets.extra/translator.json``, ``"kind": "chart_parser"``) records the
    label and tag names, the model's constituent bias and its config. Returns the path.
    """
    path = Path(path)
    module = ChartParserModule(model, tokenizer)
    logger.info("tracing the span parser's scoring graph")
    signature = module.trace()
    tf.saved_model.save(module, str(path), signatures={SIGNATURE_KEY: signature})
    metadata = {
        "kind": KIND,
        "labels": list(model.labels),
        "tags": list(model.tags),
        "bias": float(model.bias),
        "signature": SIGNATURE_KEY,
        "input": INPUT_NAME,
        "outputs": list(OUTPUT_NAMES),
        "model_config": model.config.to_dict(),
    }
    (path / METADATA_FILE).parent.mkdir(parents=True, exist_ok=True)
    (path / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n", "utf-8")
    logger.info("exported chart parser to %s", path)
    return path


class ExportedChartParser:
    """A loaded span parser export with :class:`~keras_transformer.models.span_parser.chart_parser.ChartParser`'s
    call style: the graph scores, :func:`~keras_transformer.models.span_parser.chart_parser.trees_of` decodes.

    Args:
        path: a directory written by :func:`export_chart_parser`.
        bias: the constituent bias (default: the exported model's, recorded in the metadata).
    """

    def __init__(self, path, bias: float | None = None):
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the graph uses)

        self.path = Path(path)
        self.settings = json.loads((self.path / METADATA_FILE).read_text("utf-8"))
        if self.settings.get("kind") != KIND:
            raise ValueError(f"{self.path} is not a chart parser export (kind {self.settings.get('kind')!r})")
        self.module = tf.saved_model.load(str(self.path))
        self.labels = list(self.settings["labels"])
        self.tags = list(self.settings["tags"])
        self.bias = float(self.settings["bias"]) if bias is None else float(bias)

    def scores(self, sentences: Sequence[str], batch_size: int = 32) -> list[tuple]:
        """Per sentence: span label log-probabilities ``[n + 1, n + 1, labels]`` and tag ids ``[n]``."""
        sentences = list(sentences)
        results: list = []
        for first in range(0, len(sentences), batch_size):
            batch = sentences[first: first + batch_size]
            out = self.module.scores(tf.constant(batch, tf.string))
            results.extend(sentence_scores(batch, out["spans"].numpy(), out["tags"].numpy()))
        return results

    def decoding_record(self, **decoding) -> dict:
        return chart_record(self.bias, decoding)

    def translate(self, sentences: Sequence[str], batch_size: int = 32, n_best: bool = False,
                  **decoding) -> list[str] | list[list[str]]:
        """Each sentence's best tree, linearised, scored ``batch_size`` sentences at a time (with
        ``n_best``, as a one-item list). Beam search settings do not apply, as to ``ChartParser``."""
        if isinstance(sentences, (str, bytes)):
            raise TypeError("translate() takes a list of sentences, not a single string")
        chart_record(self.bias, decoding)
        sentences = list(sentences)
        trees = trees_of(sentences, self.scores(sentences, batch_size), self.labels, self.tags, self.bias)
        return [[tree] for tree in trees] if n_best else trees

    def __call__(self, sentences: Sequence[str], **kwargs) -> list[str]:
        return self.translate(sentences, **kwargs)
