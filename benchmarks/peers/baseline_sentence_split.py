"""The keras-hub baseline's hour decoded twice: whole paragraphs (its recipe) and sentence by sentence.

Our presets translate each paragraph sentence by sentence (``keras_transformer/decoding/sentences.py``).
To compare the models and not only the products, the baseline trains once, as
:mod:`benchmarks.peers.hour_vs_kerashub` runs it (alone, on our train split, for ``--minutes``), and decodes one TSV
holding both test splits' paragraphs whole and then their sentences, cut by the same
``split_sentences`` (list items without their bullets, put back after, as ours); the sentences'
translations are joined per paragraph with a space. Both are
scored by the evaluation stage's code (``score_files``, ``loop_counts``). ``BASELINE`` is the keras-hub
baseline's folder (its ``train.py``), kept outside this repository as for :mod:`~benchmarks.peers.hour_vs_kerashub`.
(``cpu-small-sentence-split-2026-11-27.json``)::

    .venv/bin/python -m benchmarks.peers.baseline_sentence_split --corpus-dir RUN_DIR/data/ddtp-en-de \\
        --baseline-dir BASELINE --out runs/baseline-split --minutes 60
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from pathlib import Path

from benchmarks import ROOT
from benchmarks.peers.hour_vs_kerashub import SPLITS, _summary, write_baseline_inputs
from flows.tools.report import emit

logger = logging.getLogger("baseline_sentence_split")


def join_per_paragraph(lines: list[str], sentences_per_paragraph: list[int]) -> list[str]:
    """The translations of consecutive sentences joined back into one line per paragraph."""
    if sum(sentences_per_paragraph) != len(lines):
        raise ValueError(f"{len(lines)} sentence translations for {sum(sentences_per_paragraph)} sentences")
    joined, start = [], 0
    for count in sentences_per_paragraph:
        joined.append(" ".join(lines[start:start + count]))
        start += count
    return joined


def sentence_lines(pairs: list[tuple[str, str]]) -> tuple[list[str], list[str], list[int]]:
    """The baseline's TSV lines of the paragraphs' sentences, their bullets and the sentences per paragraph.

    A list item goes without its bullet, which is put back after, as our decoding does
    (``translate_by_sentence``). The reference column repeats the paragraph's: it is not used, the
    baseline's own scores of these lines are ignored.
    """
    from keras_transformer.decoding.sentences import split_bullets, split_sentences

    parts = split_sentences([s for s, _ in pairs])
    counts = [int(n) for n in parts.row_lengths()]
    bullets, bodies = (t.numpy().tolist() for t in split_bullets(parts.flat_values))
    targets = [t for (_, t), n in zip(pairs, counts) for _ in range(n)]
    lines = [f"{s.decode('utf-8')}\t{t}\n" for s, t in zip(bodies, targets)]
    return lines, [b.decode("utf-8") for b in bullets], counts


def score(directory: Path, hypotheses: list[str], references: list[str]) -> dict:
    """The evaluation stage's files and scores for one split, in ``directory``."""
    from pipelines.tasks.translation import evaluation as ev
    from pipelines.tasks.translation.repetition import loop_counts

    hypotheses = [ev.clean_line(h) for h in hypotheses]
    directory.mkdir(parents=True, exist_ok=True)
    for name, lines in ((ev.HYPOTHESES_FILE, hypotheses), (ev.REFERENCES_FILE, references),
                        (ev.TOKENIZED_HYPOTHESES_FILE, [ev.clean_line(ev.paper_tokenize(h)) for h in hypotheses]),
                        (ev.TOKENIZED_REFERENCES_FILE, [ev.clean_line(ev.paper_tokenize(r)) for r in references])):
        ev.write_lines(directory / name, lines)
    return _summary({**ev.score_files(directory), "loops": loop_counts(hypotheses, references)}, len(hypotheses))


def main(argv=None) -> int:
    from pipelines.corpus import Corpus
    from pipelines.tasks.translation.evaluation import clean_line

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus-dir", type=Path, required=True, help="a prepared corpus (a run's data/<name>)")
    parser.add_argument("--baseline-dir", type=Path, required=True, help="the keras-hub baseline's folder (train.py)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    corpus = Corpus.load(args.corpus_dir)
    counts = write_baseline_inputs(args.corpus_dir, args.out)
    sentences, bullets, per_paragraph = [], [], {}
    for split in SPLITS:
        lines, marks, per_paragraph[split] = sentence_lines(list(corpus.pairs(split)))
        sentences += lines
        bullets += marks
    with open(args.out / "eval.tsv", "a", encoding="utf-8") as file:
        file.writelines(sentences)
    command = [sys.executable, str(args.baseline_dir / "train.py"), "--train", str(args.out / "train.tsv"),
               "--test", str(args.out / "eval.tsv"), "--minutes", str(args.minutes),
               "--out", str(args.out / "kerashub")]
    logger.info("baseline: %s", " ".join(command))
    subprocess.run(command, cwd=ROOT, check=True)
    lines = (args.out / "kerashub" / "test.hyp").read_text(encoding="utf-8").splitlines()
    whole_count = sum(counts[s] for s in SPLITS)
    if len(lines) != whole_count + len(sentences):
        raise RuntimeError(f"baseline wrote {len(lines)} lines for {whole_count} paragraphs "
                           f"and {len(sentences)} sentences")
    whole = lines[:whole_count]
    split_lines = [bullet + line for bullet, line in zip(bullets, lines[whole_count:])]
    result = json.loads((args.out / "kerashub" / "result.json").read_text(encoding="utf-8"))
    report = {"benchmark": "baseline_sentence_split", "steps": result["steps"], "epochs": result["epochs"],
              "minutes": result["minutes"], "decode_seconds_all_lines": result["decode_seconds"],
              "sentences_split": len(sentences), "scores": {"whole": {}, "split": {}}}
    for split in SPLITS:
        references = [clean_line(t) for _, t in corpus.pairs(split)]
        n = sum(per_paragraph[split])
        joined = join_per_paragraph(split_lines[:n], per_paragraph[split])
        split_lines = split_lines[n:]
        scores = args.out / "scores"
        report["scores"]["whole"][split] = score(scores / "whole" / split, whole[:counts[split]], references)
        report["scores"]["split"][split] = score(scores / "split" / split, joined, references)
        whole = whole[counts[split]:]
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
