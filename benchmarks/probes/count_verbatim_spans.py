"""How many of the sources' URLs, e-mail addresses and paths come out whole in a run's translations.

    python -m benchmarks.probes.count_verbatim_spans RUN_FILES CORPUS_DIR [--output PATH]

``RUN_FILES`` is a translation run's files (``runs/NAME/latest``: its ``evaluation/`` holds the
test split's translations, ``evaluation/test_unseen/`` the unseen packages'); ``CORPUS_DIR`` the
prepared corpus they translate (``test.en``, ``test.de``, ...). A span (``keras_transformer.text``)
counts as whole when its exact string occurs in the paragraph's translation; the references are
counted the same way, and the translations of paragraphs with a span that loop.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flows.tools.report import emit

SPLITS = {"test": "", "test_unseen": "test_unseen/"}


def count(sources: list[str], hypotheses: list[str], references: list[str]) -> dict:
    from keras_transformer.text import normalize, verbatim_spans
    from pipelines.tasks.translation.repetition import repeated_ngram

    spans = [[s.decode("utf-8") for s in row] for row in verbatim_spans(normalize(sources)).to_list()]
    rows = [i for i, row in enumerate(spans) if row]
    return {"paragraphs_with_spans": len(rows), "spans": sum(len(spans[i]) for i in rows),
            "whole_in_translation": sum(s in hypotheses[i] for i in rows for s in spans[i]),
            "whole_in_reference": sum(s in references[i] for i in rows for s in spans[i]),
            "looping_translations_among_them": sum(bool(repeated_ngram(hypotheses[i])) for i in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_files", type=Path)
    parser.add_argument("corpus_dir", type=Path)
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="de")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    def lines(path: Path) -> list[str]:
        return path.read_text(encoding="utf-8").splitlines()

    report = {"benchmark": "verbatim spans whole in translations", "run_files": str(args.run_files)}
    for split, sub in SPLITS.items():
        report[split] = count(lines(args.corpus_dir / f"{split}.{args.source}"),
                              lines(args.run_files / "evaluation" / sub / "hypotheses.txt"),
                              lines(args.corpus_dir / f"{split}.{args.target}"))
    emit(report, args.output)


if __name__ == "__main__":
    main()
