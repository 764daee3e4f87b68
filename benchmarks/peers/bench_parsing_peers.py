"""The parsing peers on the project's split of the Penn Treebank sample (issue 19, point 5).

    python -m benchmarks.peers.bench_parsing_peers --treebank PATH/treebank.zip [--peers pcfg,supar]
        [--markov 1,2] [--vertical 1,2] [--supar-venv /work/supar-venv] [--minutes 60] [--threads 1]
        [--cores 1] [--train-limit N] [--output benchmarks/results/parsing-peers-DATE.json] [--smoke]

What is measured: two parsers a user could take instead of the project's Transformer parser, trained
on the same trees (NLTK's sample split by file by `pipelines.tasks.parsing.treebank.load_splits`:
wsj_0001-0159 train, wsj_0160-0179 dev, wsj_0180-0199 test) and scored on the 245 test sentences by
the project's EVALB scorer, ``score_trees(gold, predicted, cutoff_len=40, punctuation="gold")``:
labelled bracket F1, recall, precision, exact match and tagging accuracy, for all sentences and for
those of at most 40 words.

* ``pcfg``, the classical floor (benchmarks/peers/pcfg_peer.py): a treebank PCFG with collapsed unary
  chains, horizontal Markovisation h (``--markov``) and optional parent annotation v=2
  (``--vertical``), word-shape signatures for unknown words and Viterbi CKY in NumPy. Every (h, v)
  of the grid is trained on train and scored on dev; the best on dev is scored on test. A sentence
  without a parse gets a flat tree over most-frequent tags and is counted. Reported: train seconds
  (grammar induction), parsing sentences/s (in this process, on the cores it is pinned to).
* ``supar``, the neural parser a user would install (Zhang, Zhou & Li 2020, ``supar-bauwenst``):
  run from its own virtualenv (``--supar-venv``) on the same trees written as ``.pid`` files, trained
  by ``con-crf train`` for ``--minutes`` of wall clock (then killed; supar saves the best-on-dev model
  after each improving epoch) with ``--threads`` and optionally pinned with ``taskset -c --cores``,
  then ``con-crf predict`` on the test file. Its input keeps the gold POS tags and it predicts
  brackets only, so its tagging accuracy is not comparable (it is 100); its bracket F1 is.

``--smoke`` runs in seconds: the PCFG on 60 training trees and 5 test sentences, the ``.pid``
round trip of supar's input, and, only if the supar virtualenv exists, 30 seconds of its training.
Prints one JSON object; ``--output`` also writes it to a file. Nothing else is printed (logging
goes to stderr).
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.peers.pcfg_peer import PCFG
from benchmarks.peers.supar_peer import predict_supar, read_pid, train_supar, write_pid
from flows.tools.report import emit
from pipelines.tasks.parsing.evalb import score_trees
from pipelines.tasks.parsing.tree import Tree
from pipelines.tasks.parsing.treebank import load_splits

logger = logging.getLogger("bench_parsing_peers")

SCORER = 'pipelines.tasks.parsing.evalb.score_trees(gold, predicted, cutoff_len=40, punctuation="gold")'
KEYS = ("fmeasure", "recall", "precision", "complete_match", "tagging_accuracy", "sentences", "valid_sentences",
        "error_sentences", "skip_sentences")
SMOKE_SIZES = {"train": 60, "dev": 10, "test": 5}
SMOKE_SUPAR_MINUTES = 0.5


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--treebank", required=True, type=Path,
                        help="NLTK's treebank.zip (or its unpacked folder, or the LDC WSJ folder); read in place")
    parser.add_argument("--peers", default="pcfg,supar", help="comma-separated subset of pcfg,supar")
    parser.add_argument("--markov", default="1,2", help="PCFG horizontal Markov orders to try on dev")
    parser.add_argument("--vertical", default="1,2", help="PCFG vertical orders to try on dev (2: parent annotation)")
    parser.add_argument("--supar-venv", type=Path, default=Path("/work/supar-venv"),
                        help="virtualenv holding supar-bauwenst (bin/con-crf)")
    parser.add_argument("--minutes", type=float, default=60.0, help="supar training budget, wall clock")
    parser.add_argument("--threads", type=int, default=1, help="supar's torch threads")
    parser.add_argument("--cores", default=None, help="pin supar to these cores (taskset -c LIST)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="keep supar's files (.pid, model, logs) here; default: a temporary folder")
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON report here")
    parser.add_argument("--train-limit", type=int, default=None,
                        help="train on the first N training trees only (quick checks; dev and test stay whole)")
    parser.add_argument("--note", default=None, help="free text kept in the report (what this run was)")
    parser.add_argument("--smoke", action="store_true", help="tiny slices, seconds: checks the pipeline only")
    args = parser.parse_args(argv)
    args.peers = [peer.strip() for peer in args.peers.split(",") if peer.strip()]
    unknown = set(args.peers) - {"pcfg", "supar"}
    if unknown:
        parser.error(f"unknown peers {sorted(unknown)}; choose from pcfg,supar")
    args.markov = [int(h) for h in args.markov.split(",")]
    args.vertical = [int(v) for v in args.vertical.split(",")]
    return args


def summary(scores: dict) -> dict:
    """The EVALB summary of all sentences and of those up to 40 words, rounded."""
    return {part: {key: round(scores[part][key], 2) for key in KEYS} for part in ("all", "len<=40")}


def evaluate(gold: Sequence[Tree], predicted: Sequence[Tree | None]) -> dict:
    return summary(score_trees(gold, predicted, cutoff_len=40, punctuation="gold"))


def run_pcfg(splits: dict[str, list[Tree]], markov: list[int], vertical: list[int]) -> dict:
    """Pick (h, v) on dev, then train on train and parse the test sentences with the chosen grammar."""
    grid = [(h, v) for v in vertical for h in markov]
    selection = []
    if len(grid) > 1:
        for h, v in grid:
            result = parse_all(PCFG(h, v), splits["train"], splits["dev"])
            selection.append({"markov": h, "vertical": v, "dev_fmeasure": result["scores"]["all"]["fmeasure"],
                              "dev_parse_seconds": result["parse_seconds"], "grammar": result["grammar"]})
            logger.info("pcfg h=%d v=%d: dev F1 %.2f", h, v, selection[-1]["dev_fmeasure"])
        best = max(selection, key=lambda row: row["dev_fmeasure"])
        h, v = best["markov"], best["vertical"]
    else:
        (h, v), = grid
    result = parse_all(PCFG(h, v), splits["train"], splits["test"])
    logger.info("pcfg h=%d v=%d: test F1 %.2f", h, v, result["scores"]["all"]["fmeasure"])
    return {"peer": "treebank PCFG, Viterbi CKY (benchmarks/peers/pcfg_peer.py)",
            "markov": h, "vertical": v, "dev_selection": selection, **result}


def parse_all(grammar: PCFG, train: list[Tree], gold: list[Tree]) -> dict:
    started = time.perf_counter()
    grammar.fit(train)
    train_seconds = time.perf_counter() - started
    started = time.perf_counter()
    parsed = [grammar.parse(tree.words()) for tree in gold]
    parse_seconds = time.perf_counter() - started
    fallbacks = sum(tree is None for tree in parsed)
    predicted = [tree or grammar.flat_tree(gold_tree.words()) for tree, gold_tree in zip(parsed, gold)]
    return {"train_trees": len(train), "test_sentences": len(gold), "train_seconds": round(train_seconds, 2),
            "parse_seconds": round(parse_seconds, 2),
            "sentences_per_second": round(len(gold) / parse_seconds, 2) if parse_seconds else None,
            "fallback_flat_trees": fallbacks, "grammar": grammar.stats(), "scores": evaluate(gold, predicted)}


def align(gold: list[Tree], predicted: list[Tree]) -> tuple[list[Tree | None], int]:
    """Predicted trees in gold order, matched by words (supar drops a sentence it cannot read); None if missing."""
    if len(predicted) == len(gold) and all(p.words() == g.words() for p, g in zip(predicted, gold)):
        return list(predicted), 0
    out: list[Tree | None] = []
    rest = iter(predicted)
    pending = next(rest, None)
    for tree in gold:
        if pending is not None and pending.words() == tree.words():
            out.append(pending)
            pending = next(rest, None)
        else:
            out.append(None)
    return out, sum(tree is None for tree in out)


def run_supar(splits: dict[str, list[Tree]], args: argparse.Namespace, work: Path) -> dict:
    """Write the splits as .pid files, check the round trip, train for the budget, predict and score."""
    files = {name: write_pid(trees, work / f"{name}.pid") for name, trees in splits.items()}
    round_trip = all(read_pid(files[name]) == list(trees) for name, trees in splits.items())
    if not round_trip:
        raise RuntimeError("the .pid files do not read back as the trees written")
    report = {"peer": "supar-bauwenst 1.2.1 con-crf (CRF constituency parser, char LSTM, no pretrained embeddings)",
              "pid_round_trip": round_trip, "train_trees": len(splits["train"]),
              "test_sentences": len(splits["test"]), "threads": args.threads, "cores": args.cores,
              "minutes_budget": args.minutes,
              "note": "its input .pid keeps the gold POS tags and supar predicts brackets only: its tagging "
                      "accuracy is not comparable (gold tags); its labelled bracket F1 is."}
    if not (args.supar_venv / "bin" / "con-crf").exists():
        logger.warning("no supar virtualenv at %s: round trip checked, training skipped", args.supar_venv)
        return {**report, "trained": False, "why": f"no {args.supar_venv / 'bin' / 'con-crf'}"}
    report["training"] = train_supar(args.supar_venv, work, files, args.minutes, args.threads, args.cores)
    if not report["training"]["model_saved"]:
        logger.warning("supar saved no model within %.1f minutes", args.minutes)
        return {**report, "trained": False, "why": "no epoch finished within the budget"}
    pred_file, timing = predict_supar(args.supar_venv, work, files["test"], args.threads, args.cores)
    predicted, missing = align(splits["test"], read_pid(pred_file))
    seconds = timing["seconds_with_loading"]
    report.update(trained=True, epochs_finished=report["training"]["epochs_finished"],
                  train_minutes=round(report["training"]["seconds"] / 60, 2), prediction=timing,
                  # supar's own figure (parsing only); the second one includes starting torch and loading the model.
                  sentences_per_second=timing["supar_sentences_per_second"],
                  sentences_per_second_with_loading=round(len(splits["test"]) / seconds, 2),
                  missing_predictions=missing,
                  scores=evaluate(splits["test"], predicted))
    logger.info("supar: %d epochs, test F1 %.2f", report["epochs_finished"], report["scores"]["all"]["fmeasure"])
    return report


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    args = parse_args(argv)
    splits = load_splits(args.treebank)
    if args.smoke:
        splits = {name: trees[:SMOKE_SIZES[name]] for name, trees in splits.items()}
        args.minutes = min(args.minutes, SMOKE_SUPAR_MINUTES)
    if args.train_limit is not None:
        splits["train"] = splits["train"][:args.train_limit]
    report = {
        "what": "parsing peers on the project's split of the treebank" + (" (smoke: tiny slices)" * args.smoke),
        "note": args.note,
        "date": datetime.date.today().isoformat(),
        "treebank": str(args.treebank),
        "split_sizes": {name: len(trees) for name, trees in splits.items()},
        "scorer": SCORER,
        "machine": {"cpu_count": os.cpu_count(), "affinity": sorted(os.sched_getaffinity(0))},
        "peers": {},
    }
    if "pcfg" in args.peers:
        report["peers"]["pcfg"] = run_pcfg(splits, args.markov, args.vertical)
    if "supar" in args.peers:
        if args.work_dir is not None:
            args.work_dir.mkdir(parents=True, exist_ok=True)
            report["peers"]["supar"] = run_supar(splits, args, args.work_dir.resolve())
        else:
            with tempfile.TemporaryDirectory(prefix="supar-") as work:
                report["peers"]["supar"] = run_supar(splits, args, Path(work))
    emit(report, args.output, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
