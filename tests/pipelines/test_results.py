"""The stages' result types (``pipelines.results``) read back equal from the JSON they write."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipelines.results import AveragedModel, Export, PreparedCorpus, TrainingSummary
from pipelines.tasks.base import TaskEvaluation
from pipelines.vocabulary import Vocabulary

TRAINING = TrainingSummary(final_step=12, start_step=4, checkpoint_dir="/run/train", checkpoints=["ckpt-8", "ckpt-12"],
                           validation={"loss": 5.25, "perplexity": 190.5}, train_seconds=90.0, parameters=1234,
                           distribution={"strategy": "mirrored", "replicas": 2, "workers": 1,
                                         "precision": "float32"})
EVALUATION = TaskEvaluation(
    metrics={"bleu": 1.5, "chrf": 12.25}, primary="bleu",
    record={"bleu": {"score": 1.5, "signature": "nrefs:1|case:mixed"},
            "evaluation": {"split": "test", "corpus_fingerprint": "abc", "num_sentences": 12, "config": {"beam": 4}}},
    examples=[{"source": "A b .", "reference": "C d .", "translation": "C ."}], output_dir=Path("/run/evaluation"),
    headline="BLEU 1.5")
RESULTS = [PreparedCorpus("/run/data/ddtp-en-de"), Vocabulary("/run/tokenizer/spm_shared.model"),
           Vocabulary("/run/tokenizer/spm_en.model", "/run/tokenizer/spm_tree.model"), TRAINING,
           AveragedModel("/run/averaged/model.keras", ["ckpt-8", "ckpt-12"]), EVALUATION,
           Export("/run/export", {"beam_size": 4, "alpha": 0.6, "max_length_offset": 50})]


@pytest.mark.parametrize("result", RESULTS, ids=lambda result: type(result).__name__)
def test_a_stage_result_reads_back_equal_from_its_json(result):
    record = json.loads(json.dumps(result.to_dict()))
    assert type(result).from_dict(record) == result


def test_an_unknown_field_is_an_error_not_dropped():
    with pytest.raises(ValueError, match=r"PreparedCorpus: unknown fields \['dir'\]"):
        PreparedCorpus.from_dict({"directory": "x", "dir": "y"})


def test_the_training_summary_of_a_train_result_and_its_final_metrics():
    model = SimpleNamespace(count_params=lambda: 1234)
    result = SimpleNamespace(final_step=12, start_step=4, checkpoint_dir=Path("/run/train"),
                             checkpoints=["ckpt-8", "ckpt-12"], validation={"loss": 5.25, "perplexity": 190.5},
                             train_seconds=90.0, model=model, history=[{"step": 1}],
                             distribution={"strategy": "mirrored", "replicas": 2, "workers": 1,
                                           "precision": "float32"})
    assert TrainingSummary.of(result) == TRAINING
    assert TRAINING.tags() == {"training.strategy": "mirrored", "training.replicas": "2", "training.workers": "1",
                               "training.precision": "float32"}
    assert TRAINING.metrics() == {"val_loss": 5.25, "val_perplexity": 190.5, "train_minutes": 1.5, "parameters": 1234}


def test_the_evaluation_names_its_split_score_identity_and_text_tags():
    assert (EVALUATION.split, EVALUATION.score) == ("test", 1.5)
    assert EVALUATION.identity == {"split": "test", "corpus_fingerprint": "abc", "num_sentences": 12,
                                   "config": {"beam": 4}}
    assert EVALUATION.text_tags() == {"bleu.signature": "nrefs:1|case:mixed"}
