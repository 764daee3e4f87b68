"""Parse raw sentences with a trained span parser: tokenize, score every span, CKY.

The counterpart of :class:`~keras_transformer.decoding.translator.Translator` for
:class:`~keras_transformer.models.span_parser.SpanParser`: the same ``translate`` call, returning
each sentence's tree in section 6.3's linearised form (:mod:`keras_transformer.models.span_parser.chart`),
so the parsing task's evaluation scores either parser through one path.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.models.span_parser.chart import decode_chart
from keras_transformer.tokenizer import source_batch


def source_ids(tokenizer, sentences: Sequence[str] | tf.Tensor, config) -> tf.Tensor:
    """The padded source ids of ``sentences`` as the span parser ``config`` was trained on them."""
    return source_batch(tokenizer, sentences, config.eos_id, config.pad_id)


def span_scores(model, source_ids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The model's outputs as decoding reads them: span label log-probabilities ``[batch, n + 1,
    n + 1, labels]`` (float32) and the best tag ids ``[batch, n]`` (int32).

    The empty label's log-probability is replaced by that of the span not being a constituent of
    the tree, ``log(1 - m (1 - p_0))``, ``m`` the span's tree marginal under the tree CRF: the chart
    search then adds up the marginals' log-odds (minimum Bayes risk decoding, supar's ``--mbr``;
    Zhang, Zhou & Li 2020, section 3.3); the labels keep their own probabilities.
    """
    from keras_transformer.models.span_parser.tree_crf import span_marginals

    outputs = model(source_ids, training=False)
    log_probs = tf.nn.log_softmax(outputs["spans"])
    lengths = model.word_index(source_ids)[2]
    empty = log_probs[..., 0]
    # -log p_0 = log sum_l exp(s_l - s_0): the CRF's span potential.
    inside = span_marginals(-empty, tf.maximum(lengths, 1)) * -tf.math.expm1(empty)
    not_constituent = tf.math.log(tf.clip_by_value(1.0 - inside, 1e-7, 1.0))
    log_probs = tf.concat([not_constituent[..., None], log_probs[..., 1:]], axis=-1)
    return log_probs, tf.argmax(outputs["tags"], axis=-1, output_type=tf.int32)


def sentence_scores(sentences: Sequence[str], spans: np.ndarray, tags: np.ndarray
                    ) -> list[tuple[np.ndarray, np.ndarray]]:
    """A batch's scores cut to each sentence's ``n`` words (``sentence.split()``): per sentence
    ``(spans [n + 1, n + 1, labels], tags [n])``."""
    results = []
    for row, sentence in enumerate(sentences):
        n = len(sentence.split())
        results.append((spans[row, : n + 1, : n + 1], tags[row, :n]))
    return results


def trees_of(sentences: Sequence[str], scores: Sequence[tuple[np.ndarray, np.ndarray]], labels: Sequence[str],
             tags: Sequence[str], bias: float) -> list[str]:
    """Each sentence's best tree, linearised, from its :func:`sentence_scores` (``""`` for a sentence
    without words). :class:`ChartParser` and the export's reader both decode through this."""
    trees = []
    for sentence, (spans, tag_ids) in zip(sentences, scores):
        if not sentence.split():
            trees.append("")
            continue
        names = [tags[t] for t in tag_ids]
        trees.append(" ".join(decode_chart(spans, names, labels, bias)))
    return trees


def chart_record(bias: float, decoding: dict) -> dict:
    """How a chart parser decodes, for a record; beam search settings (``decoding``) do not apply to
    a chart search, and asking for them is an error rather than a silently ignored setting."""
    if any(value is not None for value in decoding.values()):
        raise ValueError(f"a span parser decodes by a chart search (CKY): the beam search settings {decoding} "
                         "do not apply")
    return {"search": "cky", "bias": float(bias)}


class ChartParser:
    """A span parser and its source tokenizer, parsing lists of sentences (words split by spaces).

    Args:
        model: a trained :class:`~keras_transformer.models.span_parser.SpanParser` whose config
            names its ``labels`` and ``tags``.
        tokenizer: the source :class:`~keras_transformer.tokenizer.SubwordTokenizer`.
        bias: the constituent bias of :func:`~keras_transformer.models.span_parser.chart.decode_chart`
            (default: the model's, chosen on dev).
        batch_size: sentences per forward pass.
    """

    def __init__(self, model, tokenizer, bias: float | None = None, batch_size: int = 32):
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.bias = model.bias if bias is None else float(bias)
        self._forward = tf.function(self._scores, input_signature=[tf.TensorSpec([None, None], tf.int32)],
                                    autograph=False)

    def _scores(self, source_ids):
        return span_scores(self.model, source_ids)

    def scores(self, sentences: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per sentence: span label log-probabilities ``[n + 1, n + 1, labels]`` and tag ids ``[n]``."""
        results = []
        for first in range(0, len(sentences), self.batch_size):
            batch = list(sentences[first: first + self.batch_size])
            spans, tags = (t.numpy() for t in self._forward(source_ids(self.tokenizer, batch, self.model.config)))
            results.extend(sentence_scores(batch, spans, tags))
        return results

    def decoding_record(self, **decoding) -> dict:
        return chart_record(self.bias, decoding)

    def translate(self, sentences: Sequence[str], n_best: bool = False, batch_size: int | None = None,
                  **decoding) -> list[str] | list[list[str]]:
        """Each sentence's best tree, linearised (with ``n_best``, as a one-item list, the form
        beam search's callers take). Beam search settings do not apply (:func:`chart_record`)."""
        chart_record(self.bias, decoding)
        if batch_size is not None:
            self.batch_size = int(batch_size)
        trees = trees_of(sentences, self.scores(sentences), self.model.labels, self.model.tags, self.bias)
        return [[tree] for tree in trees] if n_best else trees

    def __call__(self, sentences: Sequence[str], **kwargs) -> list[str]:
        return self.translate(sentences, **kwargs)
