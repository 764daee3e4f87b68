"""A finished parsing flow run, reported: its scores, its training, and its export checked against them.

The flow scores the evaluated model on the test files; users get its export (``parse --model``, the
pyfunc, the served champion). This report re-parses every scored sentence through the export and
counts the trees that differ from the scored ones (0 is the only good answer), times it, and puts
beside them the run's F1, tagging (also by the words' training frequency), exact match, baselines,
updates, minutes and calibration::

    .venv/bin/python -m benchmarks.probes.parsing_run_report --run runs/parsing-sample/latest --output result.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from flows.tools.report import emit


def export_check(run: Path) -> dict:
    """The export's trees for the scored sentences against the scored trees, and its speed."""
    from keras_transformer.decoding.export import load_exported
    from pipelines.tasks.parsing.linearize import best_tree

    evaluation = run / "evaluation"
    sentences = evaluation.joinpath("sources.txt").read_text("utf-8").splitlines()
    scored = evaluation.joinpath("predicted.trees").read_text("utf-8").splitlines()
    parser = load_exported(run / "export")
    parser.translate(sentences[:2], n_best=True)  # traced before the clock starts
    started = time.perf_counter()
    hypotheses = parser.translate(sentences, n_best=True)
    seconds = time.perf_counter() - started
    trees = [best_tree(h, s.split())[0].to_string() for h, s in zip(hypotheses, sentences)]
    differ = sum(a != b for a, b in zip(trees, scored))
    return {"sentences": len(sentences), "trees_differing_from_scored": differ, "seconds": round(seconds, 2),
            "sentences_per_second": round(len(sentences) / seconds, 1), "kind": parser.settings.get("kind")}


def tagging_by_frequency(run: Path) -> dict:
    """Test tagging accuracy by how often a word occurs in the training files (0: unseen, 1-2, 3+):
    where the tagger's errors are, unknown words (spelling) or ambiguous known ones (context).
    Counted as EVALB counts tagging: punctuation and empty elements left out."""
    from collections import Counter

    from pipelines.tasks.parsing.evalb import DELETE_LABELS
    from pipelines.tasks.parsing.tree import parse_tree

    train = next(run.parent.parent.glob("data/*/train.en"))
    seen = Counter(word for line in train.read_text("utf-8").splitlines() for word in line.split())
    counts = {"unseen": [0, 0], "seen 1-2": [0, 0], "seen 3+": [0, 0]}
    evaluation = run / "evaluation"
    for predicted, gold in zip(evaluation.joinpath("predicted.trees").read_text("utf-8").splitlines(),
                               evaluation.joinpath("gold.trees").read_text("utf-8").splitlines()):
        predicted, gold = parse_tree(predicted), parse_tree(gold)
        if predicted.words() != gold.words():
            continue
        for word, tag, right in zip(gold.words(), predicted.tags(), gold.tags()):
            if right in DELETE_LABELS:
                continue
            group = counts["unseen" if not seen[word] else "seen 1-2" if seen[word] <= 2 else "seen 3+"]
            group[0] += tag == right
            group[1] += 1
    return {name: {"words": n, "tagging_accuracy": round(100 * right / max(n, 1), 1)}
            for name, (right, n) in counts.items()}


def logged_stages(run: Path, names) -> dict:
    """The stage records the flow logged to the run's MLflow run (``stages/<name>.json``)."""
    import tempfile

    from mlflow.tracking import MlflowClient

    state = json.loads((run.parent.parent / "mlflow_run.json").read_text())
    client = MlflowClient(state["tracking_uri"])
    records = {}
    with tempfile.TemporaryDirectory() as directory:
        for name in names:
            try:
                path = client.download_artifacts(run.name, f"stages/{name}.json", directory)
            except Exception:  # noqa: BLE001  (a stage the run did not have)
                continue
            records[name] = json.loads(Path(path).read_text())
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="a run's directory (runs/<name>/runs/<id> or its latest link)")
    parser.add_argument("--output", help="also write the JSON here")
    parser.add_argument("--note", default="", help="how the run was made (cores, machine load)")
    args = parser.parse_args(argv)
    run = Path(args.run).resolve()
    scores = json.loads((run / "evaluation" / "scores.json").read_text())
    history = [json.loads(line) for line in (run / "train" / "metrics.jsonl").read_text().splitlines() if line]
    report = {
        "benchmark": "parsing flow run",
        "run": str(run),
        "note": args.note,
        "test": {key: scores["all"].get(key) for key in
                 ("fmeasure", "recall", "precision", "complete_match", "tagging_accuracy", "sentences", "words")},
        "valid_before_repair": scores.get("valid_before_repair"),
        "repaired": scores.get("repaired"),
        "test_tagging_by_training_frequency": tagging_by_frequency(run),
        "baselines": {name: value["all"]["fmeasure"] for name, value in scores["baselines"].items()},
        "decoding": scores["evaluation"]["decoding"],
        "stages": logged_stages(run, ("training", "averaging", "calibration")),
        "final_step": history[-1]["step"],
        "final_validation": {k: v for k, v in history[-1].items() if k.startswith("val_")},
        "export": export_check(run),
    }
    emit(report, Path(args.output) if args.output else None)
    return 0 if report["export"]["trees_differing_from_scored"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
