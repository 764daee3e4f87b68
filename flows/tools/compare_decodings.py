"""Is one decoding of the same sentences measurably better than another? sacreBLEU's paired test.

Two systems' translations of one test set differ in a handful of sentences when only the decoding
changes (alpha, the repetition guard, a length floor): the spread between two training runs says
nothing about that. The paired approximate-randomisation test (sacreBLEU's ``--paired-ar``; Riezler
& Maxwell 2005) asks how often swapping the two systems' outputs sentence by sentence gives a
difference as large: the p-value of "the second system is no better". It is computed here from
sacreBLEU's statistics (see :func:`paired_test` for why not with its ``PairedTest``).

    compare-decodings REFERENCES BASELINE SYSTEM [--output report.json]

Each argument is a text file of one sentence per line, as the evaluation stage writes them
(``references.txt``, ``hypotheses.txt``). Reports BLEU and chrF of both, and their p-values.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flows.tools.report import emit


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def paired_test(references: list[str], baseline: list[str], system: list[str], trials: int = 10000,
                seed: int = 0) -> dict:
    """BLEU and chrF of ``baseline`` and ``system`` and the one-sided p-value of each gain (paired AR).

    Each trial swaps the two systems' sentences with probability 1/2, sentence by sentence, and
    scores both corpora from sacreBLEU's own sufficient statistics. The p-value counts the trials
    whose gain is at least the real one (``>=``: sacreBLEU's own test counts ``>`` only, which makes
    a gain from a single changed sentence look significant, since every trial then ties or reverses
    it), plus one, over the trials plus one.
    """
    import numpy as np
    from sacrebleu.metrics import BLEU, CHRF

    if not len(references) == len(baseline) == len(system):
        raise ValueError(f"need as many lines in each file: {len(references)} references, "
                         f"{len(baseline)} and {len(system)} translations")
    rng = np.random.default_rng(seed)
    swaps = rng.random((trials, len(references))) < 0.5
    report = {"sentences": len(references), "changed_sentences": sum(a != b for a, b in zip(baseline, system)),
              "test": f"paired approximate randomisation, {trials} trials, one-sided (system better)"}
    for name, metric in (("bleu", BLEU()), ("chrf", CHRF())):
        ours, theirs = (np.asarray(metric._extract_corpus_statistics(h, [references]), dtype=np.float64)
                        for h in (system, baseline))

        def score(stats, metric=metric):
            return metric._compute_score_from_stats(stats.tolist()).score

        real = score(ours.sum(0)) - score(theirs.sum(0))
        delta = ours - theirs
        # A swapped sentence moves its statistics from one side to the other.
        at_least = sum(score(ours.sum(0) - delta[swap].sum(0)) - score(theirs.sum(0) + delta[swap].sum(0))
                       >= real - 1e-9 for swap in swaps)
        report[name] = {"baseline": round(score(theirs.sum(0)), 3), "system": round(score(ours.sum(0)), 3),
                        "difference": round(real, 3), "p_value": round((at_least + 1) / (trials + 1), 4)}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compare-decodings", description=__doc__.split("\n\n")[0])
    parser.add_argument("references", type=Path)
    parser.add_argument("baseline", type=Path, help="the translations to compare against")
    parser.add_argument("system", type=Path, help="the translations that may be better")
    parser.add_argument("--trials", type=int, default=10000)
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)
    try:
        report = paired_test(*(read_lines(p) for p in (args.references, args.baseline, args.system)), args.trials)
    except ValueError as err:
        parser.error(str(err))
    report.update(references=str(args.references), baseline_file=str(args.baseline), system_file=str(args.system))
    emit(report, args.output, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
