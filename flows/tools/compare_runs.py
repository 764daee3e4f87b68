"""A recipe variant's run beside the run it varies, sentence by sentence, on both test splits.

Two hours (or two step-budget replays) of the same preset differ by one setting; their corpus
BLEU differs by a point or less, within the spread of a rerun. What says whether the variant is
better is the paired test of :mod:`flows.tools.compare_decodings` on the same references, split by split,
with the loop counter of the evaluation stage on both runs' outputs and the references, and both
runs' validation curves from their ``train/metrics.jsonl`` (is one still learning, or overfitting?).

    compare-runs BASE_RUN RUN [--output report.json]
    # or at the end of the variant's hour itself:
    python -m benchmarks.peers.hour_vs_kerashub --ours-only --set train.model.dropout=0.2 --pair-with BASE_RUN ...

A run is the folder a translation flow run writes (``<run_dir>/runs/<run id>``, printed as its
``run_path``): its ``evaluation/`` holds ``test``'s files, ``evaluation/test_unseen/`` the other split's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from flows.tools import REPO as ROOT
from flows.tools.compare_decodings import paired_test
from flows.tools.report import emit

SPLITS = {"test": "", "test_unseen": "test_unseen"}
#: Training accuracy is a noisy per-batch figure: its mean over the last steps says where a run ended.
LAST_STEPS = 1000


class RunsDoNotPair(ValueError):
    """The two runs cannot be compared sentence by sentence; the message names the files."""


def _lines(path: Path) -> list[str]:
    from pipelines.tasks.translation.evaluation import read_lines_like_sacrebleu

    try:
        return read_lines_like_sacrebleu(path)
    except FileNotFoundError:
        raise RunsDoNotPair(f"{path}: missing (is this a translation run's folder, evaluated on both test splits?)") \
            from None


def pair_folders(base: Path, folder: Path, trials: int = 10000, first_of_base: bool = False) -> dict:
    """One split's translations in ``folder`` against those in ``base`` (evaluation folders, as the
    evaluation stage writes them): the paired test and the loop counts of both and of the references.

    ``first_of_base``: ``folder`` scored only the split's first sentences (``max_sentences``), so
    ``base``'s first as many are their pair. Raises :class:`RunsDoNotPair` when a file is missing or
    the references differ.
    """
    from pipelines.tasks.translation.evaluation import HYPOTHESES_FILE, REFERENCES_FILE
    from pipelines.tasks.translation.repetition import loop_counts

    references, hypotheses = _lines(folder / REFERENCES_FILE), _lines(folder / HYPOTHESES_FILE)
    keep = len(references) if first_of_base else None
    base_references, base_hypotheses = (_lines(base / name)[:keep] for name in (REFERENCES_FILE, HYPOTHESES_FILE))
    if base_references != references:
        raise RunsDoNotPair(f"{base / REFERENCES_FILE} and {folder / REFERENCES_FILE} differ "
                            f"({len(base_references)} and {len(references)} lines): scored on other sentences")
    test = paired_test(references, base_hypotheses, hypotheses, trials)
    return {"paired": {key: test[key] for key in ("sentences", "changed_sentences", "test", "bleu", "chrf")},
            "loops": {"run": loop_counts(hypotheses, references)["hypotheses"],
                      "base": loop_counts(base_hypotheses, references)["hypotheses"],
                      "references": loop_counts(references, references)["hypotheses"]}}


def curves(run: Path) -> dict:
    """Where a run's training ended: steps, validation perplexity at each validation, the last
    validation accuracy and the mean training accuracy of its last :data:`LAST_STEPS` steps."""
    from pipelines.training.metrics_file import read_metrics

    records = read_metrics(Path(run) / "train")
    if not records:
        raise RunsDoNotPair(f"{Path(run) / 'train' / 'metrics.jsonl'}: no training records")
    validations = [r for r in records if "val_perplexity" in r]
    last = records[-1]["step"]
    return {"steps": last,
            "validation_perplexity_by_step": {r["step"]: round(r["val_perplexity"], 2) for r in validations},
            "validation_accuracy_last": round(validations[-1]["val_token_accuracy"], 3) if validations else None,
            f"train_accuracy_last_{LAST_STEPS}_steps": round(statistics.mean(
                r["token_accuracy"] for r in records if r["step"] > last - LAST_STEPS), 3)}


def compare_runs(base: Path, run: Path, trials: int = 10000) -> dict:
    """``run`` against ``base``: the paired test and the loop counts on each test split, both runs' curves.

    Raises :class:`RunsDoNotPair` when a file is missing or the two runs were scored on other
    references (another corpus, or a ``max_sentences`` limit).
    """
    base, run = Path(base), Path(run)
    paired, loops = {}, {}
    for split, sub in SPLITS.items():
        pair = pair_folders(base / "evaluation" / sub, run / "evaluation" / sub, trials)
        paired[split], loops[split] = pair["paired"], pair["loops"]
    return {"base_run": _shown(base), "run": _shown(run), "paired_run_over_base": paired, "loops": loops,
            "curves": {"base": curves(base), "run": curves(run)}}


def _shown(path: Path) -> str:
    # Reports are committed: a run under this checkout is named from it, not from the machine's root.
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compare-runs", description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="the run compared against (the preset's)")
    parser.add_argument("run", type=Path, help="the run that may be better (the variant's)")
    parser.add_argument("--trials", type=int, default=10000)
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)
    try:
        report = compare_runs(args.base, args.run, args.trials)
    except RunsDoNotPair as err:
        parser.error(str(err))
    emit({"benchmark": "paired_runs", **report}, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
