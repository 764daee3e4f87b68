"""The span parser's bias chosen on held-out trees (pipelines/tasks/parsing/calibration.py)."""

from types import SimpleNamespace

import numpy as np

from pipelines.tasks.parsing.calibration import BIASES, bias_f1
from pipelines.tasks.parsing.chart import EMPTY, span_labels
from pipelines.tasks.parsing.linearize import linearize
from tests.pipelines.tasks.parsing.test_chart import SMALL

LABELS = [EMPTY, "NP", "S", "VP"]


class ShyParser:
    """Charts that give every gold constituent probability 0.3 (label 0, "none", 0.7): a local
    span classifier's shyness, which only a bias recovers from."""

    def __init__(self, tree):
        self.model = SimpleNamespace(labels=LABELS, tags=sorted(set(tree.tags())))
        n = len(tree.words())
        probs = np.zeros([n + 1, n + 1, len(LABELS)])
        probs[..., 0] = 0.99
        probs[..., 1:] = 0.01 / (len(LABELS) - 1)
        for (i, j), label in span_labels(tree).items():
            probs[i, j] = 0.7 / (len(LABELS) - 1)
            probs[i, j, 0], probs[i, j, LABELS.index(label)] = 0.7, 0.3
        self.chart = (np.log(probs), np.array([self.model.tags.index(t) for t in tree.tags()]))

    def scores(self, sentences):
        return [self.chart for _ in sentences]


def test_the_bias_that_recovers_the_gold_constituents_scores_best():
    pair = (" ".join(SMALL.words()), linearize(SMALL))
    scores = bias_f1(ShyParser(SMALL), [pair])
    assert set(scores) == set(BIASES)
    # Log-odds of a gold span: log(0.3 / 0.7) = -0.85; a bias of 1 or more lets every one count.
    assert scores[0.0] < 100.0 and scores[1.0] == 100.0
    assert max(scores, key=lambda bias: (scores[bias], -bias)) == 1.0
