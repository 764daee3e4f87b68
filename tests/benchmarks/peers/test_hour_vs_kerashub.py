"""The side by side's scoring of the baseline (benchmarks/peers/hour_vs_kerashub.py): its one output file
is cut back into the two test splits and scored by the evaluation stage's code. No training here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import ROOT
from benchmarks.peers import hour_vs_kerashub
from tests.flows.tools.test_compare_runs import WORSE, fake_run

score_baseline = hour_vs_kerashub.score_baseline

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
    command = hour_vs_kerashub.flow_command(Path("c.yaml"), tmp_path / "ours", 7.0, None, ("train.model.num_layers=1",))
    settings = [command[i + 1] for i, part in enumerate(command) if part == "--set"]
    assert settings == ["train.model.num_layers=1", f"run_dir={tmp_path / 'ours'}", "evaluation.split=test",
                        "train.train_minutes=7.0"]
    assert command[command.index("--config") + 1] == "c.yaml"
    replayed = hour_vs_kerashub.flow_command(Path("c.yaml"), tmp_path / "ours", 60.0, None, (), 0.128)
    assert replayed[1:6] == ["-m", "benchmarks.peers.replay", "0.128", "-m", "flows.translation"]


REPORT = ROOT / "benchmarks/results/cpu-small-one-layer-vs-kerashub-hour-2026-11-29.json"


def test_ours_alone_is_compared_with_the_baseline_of_an_earlier_report():
    previous = hour_vs_kerashub.baseline_from_report(REPORT)
    assert previous["report"] == REPORT.name and previous["steps"] > 0
    # The report's own ours against its own baseline gives back the ratios it printed.
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    assert hour_vs_kerashub.ratios(report["ours"], previous) == report["ratio_ours_over_kerashub"]


def test_a_report_without_the_baseline_s_scores_is_refused_by_name(tmp_path):
    cores = tmp_path / "cores.json"
    cores.write_text('{"benchmark": "cores", "kerashub": {"tokens_per_second": 5000}}', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"--baseline-report .*cores\.json: not a side-by-side report"):
        hour_vs_kerashub.baseline_from_report(cores)


@pytest.mark.parametrize("argv, message", [
    (["--ours-only", "--baseline-dir", "somewhere"], "drop --baseline-dir"),
    (["--baseline-report", "r.json"], "goes with --ours-only"),
    ([], "--baseline-dir None: no train.py there"),
])
def test_contradicting_arguments_stop_before_anything_runs(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as stopped:
        hour_vs_kerashub.main([*argv, "--out", str(tmp_path / "out")])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_hour_refuses_a_pair_that_is_not_an_evaluated_run_before_it_trains(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        hour_vs_kerashub.main(["--ours-only", "--pair-with", str(tmp_path / "nothing"), "--out", str(tmp_path / "out")])
    assert stopped.value.code == 2 and "no evaluation/references.txt there" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_hour_whose_pairing_fails_keeps_its_figures_and_says_why(tmp_path):
    base = fake_run(tmp_path / "preset", WORSE)
    assert "missing" in hour_vs_kerashub.paired_with(base, tmp_path / "elsewhere")["paired"]["error"]
    assert hour_vs_kerashub.paired_with(base, base)["paired"]["loops"]["test_unseen"]["run"] == 10
