"""Where a parser's POS tags go wrong: words seen in training against unseen ones.

Reads a parsing run's evaluation (``predicted.trees`` and ``gold.trees``) and its prepared
training split, and reports tagging accuracy on test words that occur in the training files and
on those that do not, beside a most-frequent-tag lookup (each known word's commonest training
tag): the floor any tagger should clear on known words. Every word counts, punctuation too
(EVALB's tagging accuracy leaves punctuation out, so its figure is a little lower).

    .venv/bin/python -m benchmarks.probes.parser_tagging runs/parsing-sample/runs/<run id>
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from flows.tools.report import emit


def training_tags(corpus_dir: Path) -> dict[str, Counter]:
    """Per training word, the counts of its tags (the slots of the linearised trees)."""
    tags: dict[str, Counter] = defaultdict(Counter)
    sources = (corpus_dir / "train.en").read_text(encoding="utf-8").splitlines()
    targets = (corpus_dir / "train.tree").read_text(encoding="utf-8").splitlines()
    for number, (words, tree) in enumerate(zip(sources, targets, strict=True), start=1):
        slots = [token for token in tree.split() if token[0] not in "()"]
        if len(slots) != len(words.split()):
            raise ValueError(f"{corpus_dir / 'train.tree'} line {number}: {len(slots)} tags for "
                             f"{len(words.split())} words")
        for word, tag in zip(words.split(), slots):
            tags[word][tag] += 1
    return tags


def tagging_report(evaluation_dir: Path, corpus_dir: Path) -> dict:
    from pipelines.tasks.parsing.tree import iter_trees

    known = training_tags(corpus_dir)
    read = lambda name: list(iter_trees((evaluation_dir / name).read_text(encoding="utf-8"),  # noqa: E731
                                        source=str(evaluation_dir / name)))
    gold, predicted = read("gold.trees"), read("predicted.trees")
    if len(gold) != len(predicted):
        raise ValueError(f"{evaluation_dir}: {len(gold)} gold trees, {len(predicted)} predicted")
    counts = {group: Counter() for group in ("known", "unknown")}
    for gold_tree, predicted_tree in zip(gold, predicted):
        for ours, truth in zip(predicted_tree.leaves(), gold_tree.leaves(), strict=True):
            group = counts["known" if truth.word in known else "unknown"]
            group["words"] += 1
            group["ours"] += ours.tag == truth.tag
            if truth.word in known:
                group["lookup"] += known[truth.word].most_common(1)[0][0] == truth.tag
    percent = lambda n, d: round(100.0 * n / max(d, 1), 1)  # noqa: E731
    return {
        group: {"words": c["words"], "ours": percent(c["ours"], c["words"]),
                "most_frequent_tag": percent(c["lookup"], c["words"])}
        for group, c in counts.items()
    } | {"all": {"words": sum(c["words"] for c in counts.values()),
                 "ours": percent(sum(c["ours"] for c in counts.values()), sum(c["words"] for c in counts.values()))}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a parsing run's directory (holds evaluation/)")
    parser.add_argument("--corpus", type=Path, help="the prepared corpus (default: <run_dir>/data/<the one>)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    corpus = args.corpus
    if corpus is None:
        found = [p for p in (args.run.resolve().parents[1] / "data").iterdir() if (p / "train.tree").is_file()]
        if len(found) != 1:
            parser.error(f"--corpus: found {len(found)} prepared corpora beside {args.run}")
        corpus = found[0]
    emit({"benchmark": "parser_tagging", "run": str(args.run), "corpus": str(corpus),
          "tagging": tagging_report(args.run / "evaluation", corpus)}, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
