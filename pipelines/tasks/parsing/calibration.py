"""The span parser's constituent bias, chosen on the validation split before it is scored and shipped.

A span parser trained with a cross-entropy per span (Kitaev & Klein 2018's local model, as in
``keras_transformer.models.span_parser``) is shy of constituents: on the sample's dev files its
spans had recall 72.7 against precision 83.8. Decoding adds a bias to every span's log-odds of
"a constituent" against "none" (``keras_transformer.models.span_parser.chart.decode_chart``); this stage
picks the bias with the best labelled F1 on the validation split and writes it into the model's
config, so the evaluation, the export and the registered model all decode with it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pipelines.corpus import Corpus

from .chart import best_tree
from .evalb import score_trees
from .linearize import delinearize

logger = logging.getLogger(__name__)

#: The biases tried (log-odds added to every span; 0 is the model's own decision). A local model is
#: shy of constituents (its best bias is above 0); a tree CRF's can be below.
BIASES = (-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0)


def bias_f1(parser, pairs: list[tuple[str, str]], biases=BIASES) -> dict[float, float]:
    """Labelled F1 (gold punctuation, as the evaluation scores) of ``parser`` (a ``ChartParser``)
    on ``pairs`` (sentence, linearised gold tree) at each bias; the chart is scored once."""
    words = [source.split() for source, _ in pairs]
    gold = [delinearize(target, w) for (_, target), w in zip(pairs, words)]
    charts = parser.scores([source for source, _ in pairs])
    model = parser.model
    results = {}
    for bias in biases:
        predicted = [best_tree(w, [model.tags[t] for t in tags], spans, model.labels, bias)
                     for w, (spans, tags) in zip(words, charts)]
        results[float(bias)] = score_trees(gold, predicted, punctuation="gold")["all"]["fmeasure"]
    return results


def calibrate(model_path: str | Path, source_tokenizer: Any, corpus: Corpus, output_path: str | Path,
              split: str = "validation") -> tuple[Path, dict[str, Any] | None]:
    """A span parser at ``model_path`` with its best bias on ``split``, saved to ``output_path``;
    another model is returned as it is (``(model_path, None)``). The record holds each bias' F1."""
    import keras

    import keras_transformer.models.span_parser  # noqa: F401  (registers classes)

    model = keras.saving.load_model(model_path, compile=False)
    if not hasattr(model, "with_bias"):  # a beam search has no constituent bias to choose
        return Path(model_path), None
    pairs = list(corpus.pairs(split))
    if not pairs:
        raise ValueError(f"split {split!r} of {corpus.directory} has no sentences to choose the bias on")
    parser = model.decoder(source_tokenizer)
    parser.bias = 0.0
    scores = bias_f1(parser, pairs)
    best = max(scores, key=lambda bias: (scores[bias], -bias))
    model.with_bias(best)
    model.save(output_path)
    logger.info("constituent bias %.1f: %s F1 %.2f (bias 0: %.2f)", best, split, scores[best], scores[0.0])
    return Path(output_path), {"bias": best, "split": split, "f1_by_bias": {str(k): v for k, v in scores.items()}}
