"""How many of the sources' URLs, e-mail addresses and paths come out whole in a run's translations.

    python -m benchmarks.probes.count_verbatim_spans RUN_FILES CORPUS_DIR [--identifiers] [--output PATH]

``RUN_FILES`` is a translation run's files (``runs/NAME/latest``: its ``evaluation/`` holds the
test split's translations, ``evaluation/test_unseen/`` the unseen packages'); ``CORPUS_DIR`` the
prepared corpus they translate (``test.en``, ``test.de``, ...). A span (``keras_transformer.text``)
counts as whole when its exact string occurs in the paragraph's translation; the references are
counted the same way, and the translations of paragraphs with a span that loop. ``--identifiers``
counts the identifiers instead (words mixing letters and digits, ``tokenizer.verbatim_identifiers``),
and scores the paragraphs that hold one apart from the others (sacreBLEU BLEU and chrF), since a
vocabulary that copies them changes those paragraphs first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flows.tools.report import emit

SPLITS = {"test": "", "test_unseen": "test_unseen/"}


def count(sources: list[str], hypotheses: list[str], references: list[str], identifiers: bool = False) -> dict:
    from keras_transformer.text import normalize, verbatim_spans
    from pipelines.tasks.translation.repetition import repeated_ngram

    normalized = normalize(sources)

    def found(**kwargs) -> list[list[str]]:
        return [[s.decode("utf-8") for s in row] for row in verbatim_spans(normalized, **kwargs).to_list()]

    spans = found()
    if identifiers:  # the spans the setting adds: those found with it and not without
        spans = [[s for s in both if s not in plain] for both, plain in zip(found(identifiers=True), spans)]
    rows = [i for i, row in enumerate(spans) if row]
    report = {"paragraphs_with_spans": len(rows), "spans": sum(len(spans[i]) for i in rows),
              "whole_in_translation": sum(s in hypotheses[i] for i in rows for s in spans[i]),
              "whole_in_reference": sum(s in references[i] for i in rows for s in spans[i]),
              "looping_translations_among_them": sum(bool(repeated_ngram(hypotheses[i])) for i in rows)}
    if identifiers:
        import sacrebleu

        chosen = set(rows)
        for name, keep in (("paragraphs_with_spans", True), ("other_paragraphs", False)):
            picked = [i for i in range(len(sources)) if (i in chosen) == keep]
            hyps, refs = [hypotheses[i] for i in picked], [[references[i] for i in picked]]
            report[f"scores_{name}"] = {"bleu": round(sacrebleu.corpus_bleu(hyps, refs).score, 2),
                                        "chrf": round(sacrebleu.corpus_chrf(hyps, refs).score, 2)}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_files", type=Path)
    parser.add_argument("corpus_dir", type=Path)
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="de")
    parser.add_argument("--identifiers", action="store_true", help="count identifiers (MD5, IPv6) instead")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    def lines(path: Path) -> list[str]:
        return path.read_text(encoding="utf-8").splitlines()

    report = {"benchmark": f"{'identifiers' if args.identifiers else 'verbatim spans'} whole in translations",
              "run_files": str(args.run_files)}
    for split, sub in SPLITS.items():
        report[split] = count(lines(args.corpus_dir / f"{split}.{args.source}"),
                              lines(args.run_files / "evaluation" / sub / "hypotheses.txt"),
                              lines(args.corpus_dir / f"{split}.{args.target}"), args.identifiers)
    emit(report, args.output)


if __name__ == "__main__":
    main()
