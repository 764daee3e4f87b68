"""The side by side's scoring of the baseline (benchmarks/hour_vs_kerashub.py): its one output file
is cut back into the two test splits and scored by the evaluation stage's code. No training here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks import load

_script = load("hour_vs_kerashub")
score_baseline = _script.score_baseline

TEST = ["Das ist ein kleines Haus am See .", "Dieses Paket enthält die Dokumentation ."]
UNSEEN = ["Werkzeuge für die Kommandozeile", "Bibliothek für Bilder und Töne", "Ein Spiel für zwei Spieler"]


def _baseline_output(out: Path, hypotheses: list[str], references: list[str]) -> None:
    (out / "kerashub").mkdir(parents=True)
    (out / "kerashub" / "test.hyp").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    (out / "kerashub" / "test.ref").write_text("\n".join(references) + "\n", encoding="utf-8")


def test_each_split_is_scored_on_its_own_lines(tmp_path):
    looping = ["Bibliothek Bibliothek Bibliothek Bibliothek", "Werkzeuge", "Spiel"]
    _baseline_output(tmp_path, TEST + looping, TEST + UNSEEN)
    scores = score_baseline(tmp_path, {"test": 2, "test_unseen": 3})
    assert scores["test"]["sentences"] == 2 and scores["test"]["bleu"] == pytest.approx(100.0)
    assert scores["test"]["looping_hypotheses"] == 0
    assert scores["test_unseen"]["sentences"] == 3 and scores["test_unseen"]["bleu"] < 20
    assert scores["test_unseen"]["looping_hypotheses"] == 1
    assert (tmp_path / "kerashub" / "scores" / "test_unseen" / "hypotheses.txt").is_file()


def test_a_count_that_does_not_add_up_is_refused(tmp_path):
    _baseline_output(tmp_path, TEST + UNSEEN, TEST + UNSEEN)
    with pytest.raises(RuntimeError, match="5 hypotheses for 6 test pairs"):
        score_baseline(tmp_path, {"test": 3, "test_unseen": 3})


def test_a_variant_s_settings_reach_the_flow_before_the_run_s_own(tmp_path):
    command = _script.flow_command(Path("c.yaml"), tmp_path / "ours", 7.0, None, ("train.model.num_layers=1",))
    settings = [command[i + 1] for i, part in enumerate(command) if part == "--set"]
    assert settings == ["train.model.num_layers=1", f"run_dir={tmp_path / 'ours'}", "evaluation.split=test",
                        "train.train_minutes=7.0"]
    assert command[command.index("--config") + 1] == "c.yaml"
