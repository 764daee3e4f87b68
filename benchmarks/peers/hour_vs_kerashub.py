"""The hour side by side, as users run it: our translation flow, then the keras-hub baseline.

Each trains alone on the whole machine for the same minutes, one after the other (issue 20,
item 5): first ``python -m flows.translation`` with a translation config (``cpu-small`` by
default: its preset's 60-minute budget; ``--minutes`` overrides it), then the baseline's
``train.py`` (``--baseline-dir``, the team's keras-hub yardstick, kept outside this repository) on
our train split for as many minutes.
Both are scored on both test splits, ``test`` (sentence hash) and ``test_unseen`` (held-out
packages), with sacreBLEU BLEU and chrF, the brevity penalty and the loop counter of the
evaluation stage (:func:`pipelines.tasks.translation.repetition.loop_counts`).

The baseline decodes one TSV: both test splits go in as one file, in order, and its hypotheses
are cut back into the two splits before scoring, so that it trains once.

    python -m benchmarks.peers.hour_vs_kerashub --baseline-dir BASELINE --out runs/hour-vs-kerashub \\
        --output benchmarks/results/cpu-small-vs-kerashub-hour-<date>.json
    # ours alone, beside the baseline's hour of an earlier report (same splits, same machine kind):
    python -m benchmarks.peers.hour_vs_kerashub --ours-only --baseline-report benchmarks/results/<report>.json \\
        --out runs/hour-ours --output benchmarks/results/cpu-small-hour-<date>.json
    # a recipe variant's hour, paired sentence by sentence with the preset's run (compare-runs):
    python -m benchmarks.peers.hour_vs_kerashub --ours-only --set train.model.dropout=0.2 --pair-with PRESET_RUN \\
        --baseline-report benchmarks/results/<report>.json --out runs/hour-dropout --output ...
    # a wiring run of the whole procedure (minutes, not an hour):
    python -m benchmarks.peers.hour_vs_kerashub --baseline-dir BASELINE --config configs/translation/demo.yaml \\
        --minutes 2 --decode-limit 40 --out runs/hour-vs-kerashub-smoke
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import ROOT
from flows.tools.compare_runs import RunsDoNotPair, compare_runs
from flows.tools.report import emit

logger = logging.getLogger("hour_vs_kerashub")
SPLITS = ("test", "test_unseen")


def _load_at_start() -> dict:
    # emit() adds the machine (CPU, cores, load) as the report ends; the load before the two
    # hours is what says whether the machine was idle for them.
    return {"load_average_at_start": os.getloadavg()}


def flow_command(config: Path, run_dir: Path, minutes: float | None, decode_limit: int | None,
                 overrides: tuple[str, ...] = (), seconds_per_step: float | None = None) -> list[str]:
    """The flow's command line: the config, then a variant's ``--set`` overrides, then the run's own;
    with ``seconds_per_step``, as a step-budget replay (:mod:`benchmarks.replay`)."""
    replay = ["-m", "benchmarks.peers.replay", str(seconds_per_step)] if seconds_per_step else []
    command = [sys.executable, *replay, "-m", "flows.translation", "--config", str(config), "--json"]
    for override in (*overrides, f"run_dir={run_dir}", "evaluation.split=test"):
        command += ["--set", override]
    if minutes is not None:
        command += ["--set", f"train.train_minutes={minutes}"]
    if decode_limit:
        command += ["--set", f"evaluation.max_sentences={decode_limit}"]
    return command


def run_ours(config: Path, run_dir: Path, minutes: float | None, decode_limit: int | None,
             overrides: tuple[str, ...] = (), seconds_per_step: float | None = None) -> dict:
    """Runs the translation flow; returns its steps, time and both splits' scores."""
    command = flow_command(config, run_dir, minutes, decode_limit, overrides, seconds_per_step)
    logger.info("ours: %s", " ".join(command))
    started = time.time()
    done = subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    seconds = time.time() - started
    result = json.loads(done.stdout)
    evaluation = Path(result["run_path"]) / "evaluation"
    scores = {}
    for split, directory in (("test", evaluation), ("test_unseen", evaluation / "test_unseen")):
        record = json.loads((directory / "scores.json").read_text(encoding="utf-8"))
        scores[split] = _summary(record, record["evaluation"]["num_sentences"])
    training = result["training"]
    return {"run_path": result["run_path"], "run_id": result["run_id"], "wall_seconds": round(seconds),
            "steps": training["final_step"], "train_seconds": round(training["train_seconds"]),
            "parameters": training["parameters"], "distribution": training.get("distribution", {}),
            "decoding": record["evaluation"].get("decoding"), "scores": scores}


def write_baseline_inputs(corpus_dir: Path, out: Path) -> dict[str, int]:
    """``train.tsv`` (our train split) and ``eval.tsv`` (test, then test_unseen); the line counts."""
    from benchmarks.peers.write_baseline_tsv import write_tsv
    from pipelines.corpus import Corpus

    corpus = Corpus.load(corpus_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts = {"train": write_tsv(corpus, "train", out / "train.tsv")}
    parts = []
    for split in SPLITS:
        counts[split] = write_tsv(corpus, split, out / f"{split}.tsv")
        parts.append((out / f"{split}.tsv").read_text(encoding="utf-8"))
    (out / "eval.tsv").write_text("".join(parts), encoding="utf-8")
    return counts


def _summary(scores: dict, sentences: int) -> dict:
    """The figures a side-by-side table needs from a ``scores.json``-shaped record."""
    return {"sentences": sentences, "bleu": round(scores["bleu"]["score"], 2),
            "chrf": round(scores["chrf"]["score"], 2),
            "brevity_penalty": round(scores["bleu"]["brevity_penalty"], 3),
            "looping_hypotheses": scores["loops"]["hypotheses"], "looping_references": scores["loops"]["references"]}


def score_baseline(out: Path, counts: dict[str, int]) -> dict[str, dict]:
    """The baseline's hypotheses cut back into the test splits and scored by the evaluation
    stage's own code (:func:`score_files`, :func:`loop_counts`), as ours are."""
    from pipelines.tasks.translation import evaluation as ev
    from pipelines.tasks.translation.repetition import loop_counts

    hypotheses = (out / "kerashub" / "test.hyp").read_text(encoding="utf-8").splitlines()
    references = (out / "kerashub" / "test.ref").read_text(encoding="utf-8").splitlines()
    expected = sum(counts[split] for split in SPLITS)
    if expected != len(hypotheses):
        raise RuntimeError(f"baseline wrote {len(hypotheses)} hypotheses for {expected} test pairs")
    scores, start = {}, 0
    for split in SPLITS:
        hyp = [ev.clean_line(h) for h in hypotheses[start:start + counts[split]]]
        ref = references[start:start + counts[split]]
        start += counts[split]
        directory = out / "kerashub" / "scores" / split
        directory.mkdir(parents=True, exist_ok=True)
        for name, lines in ((ev.HYPOTHESES_FILE, hyp), (ev.REFERENCES_FILE, ref),
                            (ev.TOKENIZED_HYPOTHESES_FILE, [ev.clean_line(ev.paper_tokenize(h)) for h in hyp]),
                            (ev.TOKENIZED_REFERENCES_FILE, [ev.clean_line(ev.paper_tokenize(r)) for r in ref])):
            ev.write_lines(directory / name, lines)
        record = {**ev.score_files(directory), "loops": loop_counts(hyp, ref)}
        scores[split] = _summary(record, len(hyp))
    return scores


def run_baseline(baseline_dir: Path, out: Path, minutes: float, counts: dict[str, int],
                 decode_limit: int | None) -> dict:
    """Trains the keras-hub baseline, then scores its hypotheses split by split."""
    if decode_limit:
        # Its --decode-limit keeps the first N of eval.tsv; keep N of each split instead.
        lines = {s: (out / f"{s}.tsv").read_text(encoding="utf-8").splitlines(True)[:decode_limit]
                 for s in SPLITS}
        (out / "eval.tsv").write_text("".join(lines["test"] + lines["test_unseen"]), encoding="utf-8")
        counts = {**counts, **{s: len(lines[s]) for s in SPLITS}}
    command = [sys.executable, str(baseline_dir / "train.py"), "--train", str(out / "train.tsv"),
               "--test", str(out / "eval.tsv"), "--minutes", str(minutes), "--out", str(out / "kerashub")]
    logger.info("baseline: %s", " ".join(command))
    started = time.time()
    subprocess.run(command, cwd=ROOT, check=True)
    seconds = time.time() - started
    result = json.loads((out / "kerashub" / "result.json").read_text(encoding="utf-8"))
    return {"wall_seconds": round(seconds), "steps": result["steps"], "epochs": result["epochs"],
            "minutes": result["minutes"], "parameters": result["params"], "train_pairs": result["train_pairs"],
            "decode_seconds_both_splits": result["decode_seconds"], "scores": score_baseline(out, counts)}


def baseline_from_report(path: Path) -> dict:
    """The keras-hub side of an earlier side-by-side report, to compare a run of ours alone with."""
    try:
        kerashub = json.loads(path.read_text(encoding="utf-8"))["kerashub"]
        scores = {split: kerashub["scores"][split] for split in SPLITS}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"--baseline-report {path}: not a side-by-side report with the baseline's scores on "
                         f"{' and '.join(SPLITS)} ({type(err).__name__}: {err})") from None
    return {"report": path.name, "steps": kerashub.get("steps"), "minutes": kerashub.get("minutes"), "scores": scores}


def ratios(ours: dict, baseline: dict) -> dict:
    """Ours over the baseline, BLEU and chrF, on each test split."""
    def ratio(split, metric):
        theirs = baseline["scores"][split][metric]
        return round(ours["scores"][split][metric] / theirs, 2) if theirs > 0 else None

    return {split: {metric: ratio(split, metric) for metric in ("bleu", "chrf")} for split in SPLITS}


def paired_with(base: Path, run: Path) -> dict:
    """The ``paired`` part of the report; an hour whose pairing fails keeps its own figures."""
    try:
        return {"paired": compare_runs(base, run)}
    except RunsDoNotPair as err:
        logger.error("--pair-with: %s; pair them later with compare-runs", err)
        return {"paired": {"error": str(err)}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs/translation/cpu-small.yaml")
    parser.add_argument("--minutes", type=float, help="training minutes of both (default: the preset's)")
    parser.add_argument("--baseline-dir", type=Path,
                        help="the keras-hub baseline's folder (holds train.py; not part of this repository)")
    parser.add_argument("--ours-only", action="store_true", help="run our flow alone; no baseline training")
    parser.add_argument("--baseline-report", type=Path,
                        help="with --ours-only: an earlier side-by-side report whose baseline scores to compare with")
    parser.add_argument("--out", type=Path, default=ROOT / "runs/hour-vs-kerashub")
    parser.add_argument("--decode-limit", type=int, help="score only the first N of each test split (wiring run)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of our run's config, as the flow's --set (a recipe variant's hour)")
    parser.add_argument("--seconds-per-step", type=float, metavar="S",
                        help="replay our hour as a step budget, each step worth S seconds (benchmarks.peers.replay)")
    parser.add_argument("--pair-with", type=Path, metavar="RUN",
                        help="an earlier run of ours (its run_path) to pair our run with, sentence by sentence")
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)
    if args.pair_with and not (args.pair_with / "evaluation" / "references.txt").is_file():
        parser.error(f"--pair-with {args.pair_with}: no evaluation/references.txt there (not an evaluated run)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.ours_only:
        if args.baseline_dir:
            parser.error("--ours-only trains no baseline: drop --baseline-dir")
        previous = baseline_from_report(args.baseline_report) if args.baseline_report else None
    elif args.baseline_report:
        parser.error("--baseline-report goes with --ours-only")
    elif args.baseline_dir is None or not (args.baseline_dir / "train.py").is_file():
        parser.error(f"--baseline-dir {args.baseline_dir}: no train.py there")
    machine = _load_at_start()
    ours = run_ours(args.config.resolve(), args.out.resolve() / "ours", args.minutes, args.decode_limit,
                    tuple(args.set), args.seconds_per_step)
    config = args.config.resolve()
    config = config.relative_to(ROOT) if config.is_relative_to(ROOT) else config
    paired = paired_with(args.pair_with, Path(ours["run_path"])) if args.pair_with else {}
    if args.ours_only:
        emit({"benchmark": "hour_vs_kerashub --ours-only", "config": str(config), "settings": args.set,
              "how": "our flow alone on the whole machine; the baseline is not trained here"
                     + (f" but read from {previous['report']}" if previous else ""),
              "machine": machine, "decode_limit": args.decode_limit, "ours": ours, **paired,
              **({"kerashub_from_report": previous, "ratio_ours_over_kerashub": ratios(ours, previous)}
                 if previous else {})}, args.output)
        return 0
    corpus_dirs = [p for p in (args.out / "ours" / "data").iterdir() if (p / "manifest.json").is_file()]
    if len(corpus_dirs) != 1:
        raise RuntimeError(f"expected one prepared corpus under {args.out / 'ours' / 'data'}, found {corpus_dirs}")
    counts = write_baseline_inputs(corpus_dirs[0], args.out / "baseline")
    minutes = args.minutes if args.minutes is not None else ours["train_seconds"] / 60
    baseline = run_baseline(args.baseline_dir.resolve(), args.out / "baseline", minutes, counts, args.decode_limit)
    emit({"benchmark": "hour_vs_kerashub", "config": str(config), "settings": args.set,
          "how": "each alone on the whole machine, one after the other; the baseline for our training minutes, "
                 "on our train split; both scored on both test splits",
          "machine": machine, "minutes": round(minutes, 1), "decode_limit": args.decode_limit,
          "ours": ours, **paired, "kerashub": baseline, "ratio_ours_over_kerashub": ratios(ours, baseline)},
         args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
