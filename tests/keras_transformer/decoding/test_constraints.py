"""BracketConstraint: every finished hypothesis of a constrained beam search is a tree over its slots."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding.beam import beam_search
from keras_transformer.decoding.constraints import BracketConstraint

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SLOTS = (4, 5)
OPEN, CLOSE = (6, 8), (7, 9)
VOCAB = 10


def random_score_fn(seed):
    """Log-probabilities that ignore the prefix: any grammar in the output comes from the mask."""
    table = tf.random.stateless_normal([64, VOCAB], seed=[seed, 0]) * 3.0

    def score_fn(ids, step, state):
        logits = tf.gather(table, tf.fill([tf.shape(ids)[0]], step % 64))
        return tf.nn.log_softmax(logits), state

    return score_fn


def is_tree(tokens, slots):
    stack, previous = [], None
    for token in tokens:
        if token in OPEN:
            stack.append(OPEN.index(token))
        elif token in CLOSE:
            if not stack or stack.pop() != CLOSE.index(token) or previous in OPEN:
                return False
        elif token not in SLOTS:
            return False
        previous = token
    return not stack and sum(t in SLOTS for t in tokens) == slots


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_finished_hypothesis_is_balanced_with_exactly_the_slots(seed):
    constraint = BracketConstraint(VOCAB, SLOTS, OPEN, CLOSE, EOS, max_depth=4)
    slots = tf.constant([1, 3, 6], tf.int32)
    beam = 4
    score_fn = constraint.wrap(random_score_fn(seed))
    state = ((), constraint.initial_state(tf.repeat(slots, beam)))
    result = beam_search(score_fn, state, tf.fill([3], 40), beam_size=beam, alpha=0.6,
                         bos_id=BOS, eos_id=EOS, pad_id=PAD)
    scores, ids, lengths = result.scores.numpy(), result.ids.numpy(), result.lengths.numpy()
    for sentence, needed in enumerate(slots.numpy()):
        finished = [b for b in range(beam) if np.isfinite(scores[sentence, b]) and scores[sentence, b] > -1e8]
        assert finished, "the search found no complete hypothesis"
        for b in finished:
            tokens = list(ids[sentence, b, : lengths[sentence, b]])
            assert tokens[-1] == EOS and is_tree(tokens[:-1], needed), tokens


def test_without_the_constraint_the_same_scores_are_not_trees():
    # The guard: the random scores alone do not produce trees, so the test above tests the mask.
    result = beam_search(random_score_fn(0), (), tf.fill([1], 40), beam_size=4, alpha=0.6,
                         bos_id=BOS, eos_id=EOS, pad_id=PAD)
    tokens = list(result.ids.numpy()[0, 0, : result.lengths.numpy()[0, 0]])
    assert not is_tree([t for t in tokens if t != EOS], 3)


def test_invalid_definitions_are_rejected():
    with pytest.raises(ValueError):
        BracketConstraint(VOCAB, SLOTS, OPEN, CLOSE[:1], EOS)
