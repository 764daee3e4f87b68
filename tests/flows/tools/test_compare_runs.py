"""``compare-runs`` (flows/tools/compare_runs.py) on two hand-made run folders: the paired test and loop counts on both
test splits, the curves from each run's metrics.jsonl, and refusals that name the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.tools import compare_runs

REFERENCES = {"test": ["Die Katze sitzt auf der Matte.", "Ein Hund rennt im Park.", "Es regnet heute sehr stark."] * 10,
              "test_unseen": ["Werkzeuge für die Kommandozeile", "Bibliothek für Bilder und Töne"] * 10}
WORSE = {"test": ["Die Katze sitzt auf Matte.", "Ein Hund im Park.", "Es regnet heute stark."] * 10,
         "test_unseen": ["Werkzeuge für", "Bibliothek für Bilder Bilder Bilder Bilder"] * 10}


def fake_run(folder: Path, hypotheses: dict[str, list[str]], references=REFERENCES, steps: int = 1500) -> Path:
    for split, sub in compare_runs.SPLITS.items():
        evaluation = folder / "evaluation" / sub
        evaluation.mkdir(parents=True, exist_ok=True)
        (evaluation / "references.txt").write_text("\n".join(references[split]) + "\n", encoding="utf-8")
        (evaluation / "hypotheses.txt").write_text("\n".join(hypotheses[split]) + "\n", encoding="utf-8")
    (folder / "train").mkdir(parents=True)
    records = [{"step": s, "token_accuracy": 0.5 if s > steps - 1000 else 0.1} for s in range(1, steps + 1)]
    for record in records:
        if record["step"] % 500 == 0:
            record.update(val_perplexity=100.0 / record["step"], val_token_accuracy=record["step"] / 10000)
    (folder / "train" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return folder


def test_a_variant_better_on_every_sentence_is_paired_split_by_split(tmp_path):
    base = fake_run(tmp_path / "preset", WORSE)
    variant = fake_run(tmp_path / "variant", REFERENCES, steps=2000)
    report = compare_runs.compare_runs(base, variant, trials=300)
    for split, sentences in (("test", 30), ("test_unseen", 20)):
        paired = report["paired_run_over_base"][split]
        assert paired["sentences"] == paired["changed_sentences"] == sentences
        assert paired["bleu"]["system"] == 100.0 and paired["bleu"]["difference"] > 0
        assert paired["bleu"]["p_value"] < 0.01 and paired["chrf"]["p_value"] < 0.01
    # Every other unseen hypothesis of the preset repeats "Bilder" four times in a row.
    assert report["loops"]["test_unseen"] == {"run": 0, "base": 10, "references": 0}
    assert report["loops"]["test"] == {"run": 0, "base": 0, "references": 0}
    assert report["curves"]["base"]["validation_perplexity_by_step"] == {500: 0.2, 1000: 0.1, 1500: 0.07}
    assert report["curves"]["run"]["steps"] == 2000 and report["curves"]["run"]["validation_accuracy_last"] == 0.2
    assert report["curves"]["run"]["train_accuracy_last_1000_steps"] == 0.5


def test_runs_scored_on_other_sentences_are_refused_with_both_files_named(tmp_path):
    base = fake_run(tmp_path / "preset", WORSE)
    limited = {split: lines[:6] for split, lines in REFERENCES.items()}
    variant = fake_run(tmp_path / "variant", limited, references=limited)
    with pytest.raises(compare_runs.RunsDoNotPair, match=r"preset/evaluation/references\.txt and .*variant/evaluation/"
                                                    r"references\.txt differ \(30 and 6 lines\)"):
        compare_runs.compare_runs(base, variant, trials=10)


def test_a_run_without_the_unseen_split_is_refused_by_the_missing_file(tmp_path, capsys):
    base = fake_run(tmp_path / "preset", WORSE)
    variant = fake_run(tmp_path / "variant", REFERENCES)
    (variant / "evaluation" / "test_unseen" / "hypotheses.txt").unlink()
    with pytest.raises(SystemExit) as stopped:
        compare_runs.main([str(base), str(variant), "--trials", "10"])
    assert stopped.value.code == 2
    assert "variant/evaluation/test_unseen/hypotheses.txt: missing" in capsys.readouterr().err


def test_compare_runs_writes_its_report(tmp_path, capsys):
    base = fake_run(tmp_path / "preset", WORSE)
    variant = fake_run(tmp_path / "variant", REFERENCES, steps=2000)
    assert compare_runs.main([str(base), str(variant), "--trials", "100", "--output", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert json.loads(capsys.readouterr().out) == report
    assert report["benchmark"] == "paired_runs" and report["machine"]["cpus"] >= 1
    assert report["paired_run_over_base"]["test"]["bleu"]["p_value"] < 0.05
    assert report["curves"]["run"]["steps"] == 2000



def test_compare_runs_reads_runs_without_tensorflow(tmp_path):
    """A user's ``compare-runs`` prints its report and nothing of TensorFlow's start-up: it reads text files."""
    import subprocess
    import sys

    from tests.commands import ENV, REPO

    base = fake_run(tmp_path / "preset", WORSE)
    variant = fake_run(tmp_path / "variant", REFERENCES)
    code = ("import sys; from flows.tools.compare_runs import main; code = main(sys.argv[1:]); "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'; sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", code, str(base), str(variant), "--trials", "10"], cwd=REPO,
                          env={k: v for k, v in ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL"}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    assert json.loads(done.stdout)["paired_run_over_base"]["test"]["sentences"] == 30
