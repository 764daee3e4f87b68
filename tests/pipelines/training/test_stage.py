"""The training stage's checks of its settings against the model, before any training."""

import pytest

from keras_transformer.models.presets import get_preset
from pipelines.input_pipeline import InputConfig
from pipelines.training.stage import check_bucketing


def test_source_bucketing_is_refused_for_a_model_that_decodes_the_target():
    by_source = InputConfig(bucket_by="source")
    check_bucketing(by_source, get_preset("span-parser-cpu").model_config(source_vocab_size=100))
    check_bucketing(InputConfig(), get_preset("parser-cpu").model_config(vocab_size=100))
    with pytest.raises(ValueError, match=r"input.bucket_by: source .* set input.bucket_by: longer"):
        check_bucketing(by_source, get_preset("parser-cpu").model_config(vocab_size=100))
