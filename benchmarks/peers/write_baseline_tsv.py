"""Writes a prepared corpus's splits as ``source<TAB>target`` files for a peer baseline.

    python -m benchmarks.peers.write_baseline_tsv runs/cpu-small/data/ddtp-en-de runs/baseline

writes ``train.tsv`` (our train split) and ``test.tsv`` (our test split) so that a peer model,
such as the keras-hub baseline (``train.py --train train.tsv --test test.tsv --minutes 60``),
trains and is scored on exactly the sentences our model sees and is scored on. A tab or line
break inside a sentence (none in the bundled corpora) would break the format, so it is refused.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipelines.corpus import Corpus

logger = logging.getLogger("write_baseline_tsv")


def write_tsv(corpus: Corpus, split: str, path: Path) -> int:
    lines = []
    for number, (source, target) in enumerate(corpus.pairs(split), start=1):
        for text in (source, target):
            if "\t" in text or "\n" in text:
                raise ValueError(f"{corpus.directory} {split} pair {number}: a tab or line break in {text!r}")
        lines.append(f"{source}\t{target}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return len(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus_dir", type=Path)
    parser.add_argument("output_dir", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    corpus = Corpus.load(args.corpus_dir)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        n = write_tsv(corpus, split, args.output_dir / f"{split}.tsv")
        logger.info("%s: %d pairs -> %s", split, n, args.output_dir / f"{split}.tsv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
