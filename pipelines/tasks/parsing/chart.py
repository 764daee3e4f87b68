"""Trees as labelled span charts, for the span parser (``keras_transformer.models.span_parser``).

A span parser (Stern, Andreas & Klein 2017; Kitaev & Klein 2018) scores every span ``(i, j)`` of
a sentence (words ``i .. j-1``) for every constituent label and for "no constituent". Unary chains
are one label (``S+VP``); the root ``TOP`` is implicit, and preterminals (POS tags) are a tagger's,
so a span of one word carries only the chain above its tag (``NP`` over a lone ``NN``).
:func:`span_labels` reads a gold tree into the chart a model learns; :func:`best_tree` is the
tree of a scored chart (``keras_transformer.models.span_parser.chart``'s CKY, read back by
:func:`.linearize.delinearize`). A gold chart gives the gold tree back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from keras_transformer.models.span_parser.chart import CHAIN, EMPTY, decode_chart

from .linearize import delinearize
from .tree import Leaf, Tree

__all__ = ["CHAIN", "EMPTY", "best_tree", "span_labels"]


def span_labels(tree: Tree) -> dict[tuple[int, int], str]:
    """Every constituent of ``tree`` below the root as ``{(i, j): "S+VP"}`` (unary chains joined,
    preterminals left out)."""
    labels: dict[tuple[int, int], str] = {}

    def visit(node: Tree, start: int) -> int:
        chain = []
        while True:
            chain.append(node.label)
            if len(node.children) == 1 and isinstance(node.children[0], Tree):
                node = node.children[0]
            else:
                break
        end = start
        for child in node.children:
            end = end + 1 if isinstance(child, Leaf) else visit(child, end)
        labels[(start, end)] = CHAIN.join(chain)
        return end

    end = 0
    for child in tree.children:  # the root (TOP) itself is implicit
        end = end + 1 if isinstance(child, Leaf) else visit(child, end)
    return labels


def best_tree(words: Sequence[str], tags: Sequence[str], log_probs: np.ndarray, labels: Sequence[str],
              bias: float = 0.0) -> Tree:
    """The best tree over ``words`` of span label log-probabilities
    (:func:`keras_transformer.models.span_parser.chart.decode_chart`)."""
    if len(words) != len(tags):
        raise ValueError(f"{len(words)} words but {len(tags)} tags")
    return delinearize(decode_chart(log_probs, tags, labels, bias), words)
