"""The training stage finishing on another corpus: the switch at its share of the run, and resumes on
either side of it reading the stream their checkpoint's position belongs to.

The first corpus is real DDTP paragraphs, the finishing one short pairs of a few words, so each step's
sentence count says which corpus it read; the losses of interrupted runs are the uninterrupted run's.
"""

from __future__ import annotations

import json
import shutil

import pytest

from pipelines.corpus import write_corpus
from pipelines.input_pipeline import InputConfig
from pipelines.training import read_metrics
from pipelines.training.stage import SWITCH_FILE, train_on_corpus
from pipelines.vocabulary import Vocabulary
from tests.pipelines.conftest import INPUT, tiny_config

SHORT = [(f"Package {i}.", f"Paket {i}.") for i in range(200)]


class Interrupted(Exception):
    pass


def test_the_last_share_trains_on_the_finishing_corpus_and_resumes_on_either_side_of_the_switch(
        tmp_path, ddtp_corpus, tokenizer):
    short = write_corpus(tmp_path / "short", "en", "de", {"train": SHORT, "validation": SHORT[:8], "test": SHORT[:8]},
                         source="t")
    tokenizers = Vocabulary(tokenizer)

    def run(directory: str, stop_after: int | None = None, data_resume: str = "skip"):
        config = tiny_config(tmp_path, checkpoint_dir=str(tmp_path / directory), train_steps=8,
                             checkpoint_every_steps=1, data_resume=data_resume)

        def on_step(step, record):
            if step == stop_after:
                raise Interrupted(step)

        try:
            return train_on_corpus(ddtp_corpus, tokenizers, InputConfig(**INPUT), config, on_step=on_step,
                                   finish_on=short, finish_share=0.25)
        except Interrupted:
            return None

    whole = run("whole")
    assert (whole.start_step, whole.final_step) == (0, 8) and whole.validation
    assert json.loads((tmp_path / "whole" / SWITCH_FILE).read_text()) == {"corpus": str(short.directory),
                                                                         "from_step": 6, "from_batch": 6}
    records = read_metrics(tmp_path / "whole")
    sentences = [r["sentences"] for r in records]
    # Three-word pairs fill a 300-token step with several times the sentences of real paragraphs.
    assert max(sentences[:6]) * 2 < min(sentences[6:]), sentences

    # Killed at the switch's checkpoint (before the switch was recorded), then after the first finishing step.
    assert run("resumed", stop_after=6) is None and not (tmp_path / "resumed" / SWITCH_FILE).exists()
    assert run("resumed", stop_after=7) is None
    shutil.copytree(tmp_path / "resumed", tmp_path / "replayed")
    resumed = run("resumed")
    assert (resumed.start_step, resumed.final_step) == (7, 8)
    losses = pytest.approx([r["loss"] for r in records], rel=1e-5)
    assert [r["loss"] for r in read_metrics(tmp_path / "resumed")] == losses
    # Replayed instead of restored, the finishing stream skips only the batch drawn from it since the switch.
    assert run("replayed", data_resume="replay").final_step == 8
    assert [r["loss"] for r in read_metrics(tmp_path / "replayed")] == losses

    with pytest.raises(ValueError, match="finish_share=1.5"):
        train_on_corpus(ddtp_corpus, tokenizers, InputConfig(**INPUT), tiny_config(tmp_path / "bad"),
                        finish_on=short, finish_share=1.5)
