"""The beam-search profile splits a batch's step time into model, constraint and beam, and its
model-only program runs exactly the decoder steps the full search took."""


import numpy as np
import pytest

from benchmarks.speed import parser_beam_profile
from tests.keras_transformer.layers.test_word_alignment import CLOSE, EOS, OPEN, SLOTS, SOURCE, model_with_alignment


@pytest.mark.parametrize("beam_size", [1, 3])
def test_profile_parts_add_up_to_the_full_step(beam_size):
    profile_batch = parser_beam_profile.profile_batch

    from keras_transformer.decoding.constraints import BracketConstraint

    model = model_with_alignment()
    constraint = BracketConstraint(16, SLOTS, OPEN, CLOSE, EOS)
    result = profile_batch(model, SOURCE.numpy(), np.array([3, 2], np.int32), constraint, beam_size,
                           alpha=0.3, max_length_offset=6)
    assert result["beam_size"] == beam_size and result["sentences"] == 2
    # The longer sentence needs at least its 3 slots and EOS (the constraint lets an untrained model
    # end a bracketless tag sequence, 3 slots and EOS, as seen); the cap is 5 + 6 + EOS.
    assert 4 <= result["steps"] <= 12
    parts = result["ms_per_step"]
    assert parts["model"] > 0 and parts["total"] > 0
    assert parts["model"] + parts["constraint"] + parts["beam"] == pytest.approx(parts["total"], abs=0.05)
