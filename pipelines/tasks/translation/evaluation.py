"""Evaluation stage: translate a test split and score it with sacreBLEU (section 6.1, Table 2).

Three numbers, clearly separated in ``scores.json``:

* ``bleu``: detokenized corpus BLEU by sacreBLEU (its default 13a tokenization, mixed case), the
  comparable standard today, with its signature string;
* ``chrf``: sacreBLEU chrF2 on the same detokenized text, with its signature;
* ``tokenized_bleu_compound_split``: the variant the paper reported. Its 28.4 En-De BLEU came from
  tensor2tensor's ``get_ende_bleu.sh``: Moses ``replace-unicode-punctuation.perl`` and
  ``tokenizer.perl -l de``, then every hyphenated compound split as ``a ##AT##-##AT## b``, then
  ``multi-bleu.perl`` on the tokenized text. Here: the same punctuation replacements
  (:data:`~pipelines.tasks.translation.paper_bleu.UNICODE_PUNCTUATION`), sacreBLEU's 13a
  tokenizer in place of Moses' tokenizer.perl
  (both split punctuation off words and keep hyphenated words whole; 13a does not split
  apostrophes or escape ``&<>'"`` as HTML entities, which Moses does), the identical compound
  split regex, and sacreBLEU with ``--tokenize none`` in place of multi-bleu.perl (the same BLEU
  on pre-tokenized text). Both sides, hypothesis and reference, are processed alike, since the
  reference is not pre-tokenized here. Numbers of this variant are not comparable to
  detokenized BLEU (it is usually higher).

Beside them: the brevity penalty and length ratio of BLEU, and loops (:mod:`.repetition`), counted
on the hypotheses and on the references. A corpus with a second test split (the bundled DDTP
corpora's ``test_unseen``: whole packages nobody trained on) is scored on it too, in a
subdirectory of the same name, its numbers beside the first split's (``test_unseen_bleu``).

Every score is computed from the files written to the output directory, read the way the
``sacrebleu`` command line reads them, and ``scores.json`` records the exact command that
reproduces each number from those files (run it in the output directory).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from sacrebleu.metrics import BLEU, CHRF

from keras_transformer.files import atomic_write_bytes
from pipelines.config import SettingError
from pipelines.corpus import EXTRA_SPLITS, SPLITS, Corpus
from pipelines.decoding import MOVED_TO_DECODING, DecodingOverrides, decode
from pipelines.tasks.translation.paper_bleu import (  # noqa: F401  (part of this module's API)
    UNICODE_PUNCTUATION,
    paper_tokenize,
    replace_unicode_punctuation,
    split_compounds,
)
from pipelines.tasks.translation.reading import TABLE_FILE, draw_attention, sentence_table, write_table
from pipelines.tasks.translation.repetition import ends_in_repetition, loop_counts

logger = logging.getLogger(__name__)

SOURCES_FILE = "sources.txt"
HYPOTHESES_FILE = "hypotheses.txt"
REFERENCES_FILE = "references.txt"
TOKENIZED_HYPOTHESES_FILE = "hypotheses.tok.atat.txt"
TOKENIZED_REFERENCES_FILE = "references.tok.atat.txt"
SCORES_FILE = "scores.json"

BLEU_LABEL = "detokenized BLEU (sacreBLEU)"
CHRF_LABEL = "chrF2 (sacreBLEU)"
TOKENIZED_BLEU_LABEL = (
    "tokenized BLEU with compound splitting (t2t get_ende_bleu.sh style: unicode punctuation "
    "replaced, 13a-tokenized, a-b -> a ##AT##-##AT## b); the paper's metric, not comparable "
    "to detokenized BLEU"
)



@dataclass
class EvalConfig:
    """Settings of the evaluation stage (section 6.1's scoring of the test split)."""

    removed_settings: ClassVar[dict[str, str]] = MOVED_TO_DECODING | {
        "width": "the recorded sacreBLEU commands print 4 decimals"}

    #: The split translated and scored.
    split: str = "test"
    #: Splits scored after ``split`` the same way (``[]``: none); null: a ``test`` evaluation also
    #: scores the corpus' other test splits (``test_unseen``).
    extra_splits: tuple[str, ...] | None = None
    #: Overrides of the preset's decoding (``DecodingSettings``), by the preset's names; the export
    #: decodes with the same.
    decoding: DecodingOverrides = field(default_factory=DecodingOverrides)
    #: Sentences decoded together.
    batch_size: int = 32
    #: Evaluate only the first sentences of the split (quick checks).
    max_sentences: int | None = None
    #: How many of the best and of the worst sentences get an attention picture (:mod:`.reading`).
    attention_examples: int = 2

    def __post_init__(self) -> None:
        # Checked here, not when the corpus is opened: in a pipeline that is after training.
        for split in (self.split, *(self.extra_splits or ())):
            if split not in SPLITS + EXTRA_SPLITS:
                known = list(SPLITS + EXTRA_SPLITS)
                raise (SettingError(self, "split", f"must be one of {known}") if split == self.split
                       else SettingError(self, "extra_splits", f"{split!r} is not one of {known}"))
        if self.extra_splits is not None:
            self.extra_splits = tuple(s for s in dict.fromkeys(self.extra_splits) if s != self.split)
        if isinstance(self.decoding, dict):  # built in code rather than read by from_dict
            self.decoding = DecodingOverrides(**self.decoding)
        if self.batch_size < 1:
            raise SettingError(self, "batch_size", "must be positive")
        if self.max_sentences is not None and self.max_sentences < 1:
            raise SettingError(self, "max_sentences", "must be positive")
        if self.attention_examples < 0:
            raise SettingError(self, "attention_examples", "must be >= 0")


@dataclass
class EvalResult:
    """Scores of one evaluation and where its files are (``scores`` is ``scores.json``)."""

    output_dir: Path
    num_sentences: int
    bleu: float
    chrf: float
    tokenized_bleu: float
    scores: dict[str, Any] = field(default_factory=dict)
    #: The results of ``extra_splits``, by split (their files are in ``output_dir/<split>``).
    others: dict[str, EvalResult] = field(default_factory=dict)

    @property
    def scores_path(self) -> Path:
        return self.output_dir / SCORES_FILE

    def metrics(self) -> dict[str, float]:
        """Flat numbers for a metrics logger."""
        loops = self.scores.get("loops", {})
        metrics = {"bleu": self.bleu, "chrf": self.chrf, "tokenized_bleu_compound_split": self.tokenized_bleu,
                   "brevity_penalty": self.scores.get("bleu", {}).get("brevity_penalty", 0.0),
                   "repeated_endings": self.scores.get("repeated_endings", {}).get("count", 0),
                   "looping_hypotheses": loops.get("hypotheses", 0), "looping_references": loops.get("references", 0)}
        for split, other in self.others.items():
            metrics.update({f"{split}_{key}": value for key, value in other.metrics().items()})
        return metrics

    def headline(self, split: str) -> str:
        """One line per scored split, as a reader wants them first: BLEU, brevity penalty, chrF, loops."""
        lines = []
        for name, result in ((split, self), *self.others.items()):
            m = result.metrics()
            lines.append(f"{name}: BLEU {m['bleu']:.2f} (brevity penalty {m['brevity_penalty']:.3f}), chrF "
                         f"{m['chrf']:.1f} on {result.num_sentences} sentences; {m['looping_hypotheses']} "
                         f"translations loop (references: {m['looping_references']})")
        return "\n".join(lines)

    def examples(self, n: int = 3) -> list[dict[str, str]]:
        """The first ``n`` sentences with their reference and translation, to show a reader."""
        files = {key: read_lines_like_sacrebleu(self.output_dir / name) for key, name in
                 (("source", SOURCES_FILE), ("reference", REFERENCES_FILE), ("translation", HYPOTHESES_FILE))}
        return [{key: lines[i] for key, lines in files.items()} for i in range(min(n, self.num_sentences))]



# ---------------------------------------------------------------------------- text handling


def clean_line(text: str) -> str:
    """A translation as one file line: no line breaks, no trailing whitespace.

    The ``sacrebleu`` command line splits files on ``\\n`` only and strips trailing whitespace
    of every line; scoring the same strings keeps the API and the command line identical.
    """
    return text.replace("\r", " ").replace("\n", " ").rstrip()


def read_lines_like_sacrebleu(path: str | Path) -> list[str]:
    """Lines of ``path`` exactly as the ``sacrebleu`` command line reads them."""
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip() for line in f]


def write_lines(path: Path, lines: list[str]) -> None:
    atomic_write_bytes(path, "".join(line + "\n" for line in lines).encode("utf-8"))


# ---------------------------------------------------------------------------------- scoring


def _command(metric: str, references: str, hypotheses: str, width: int, *extra: str) -> str:
    return shlex.join(["sacrebleu", references, "-i", hypotheses, "-m", metric, "-w", str(width), *extra])


def score_files(output_dir: str | Path, width: int = 4) -> dict[str, Any]:
    """Scores the hypothesis/reference files in ``output_dir`` (as written by :func:`evaluate`).

    Returns the ``scores.json`` content: per metric the score, sacreBLEU's signature, a label
    and the command line reproducing the score from the files.
    """
    output_dir = Path(output_dir)
    hypotheses = read_lines_like_sacrebleu(output_dir / HYPOTHESES_FILE)
    references = read_lines_like_sacrebleu(output_dir / REFERENCES_FILE)
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{output_dir}: {len(hypotheses)} hypotheses but {len(references)} references"
        )
    bleu = BLEU()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf = CHRF()
    chrf_score = chrf.corpus_score(hypotheses, [references])
    tok_hypotheses = read_lines_like_sacrebleu(output_dir / TOKENIZED_HYPOTHESES_FILE)
    tok_references = read_lines_like_sacrebleu(output_dir / TOKENIZED_REFERENCES_FILE)
    # These files are tokenized on purpose (the paper's compound-split BLEU): force=True says so,
    # or sacreBLEU warns on every evaluation that the data "looks tokenized".
    tok_bleu = BLEU(tokenize="none", force=True)
    tok_score = tok_bleu.corpus_score(tok_hypotheses, [tok_references])
    return {
        "bleu": {
            "label": BLEU_LABEL,
            "score": bleu_score.score,
            "signature": str(bleu.get_signature()),
            "verbose": str(bleu_score),
            "brevity_penalty": bleu_score.bp,
            "length_ratio": bleu_score.sys_len / bleu_score.ref_len if bleu_score.ref_len else 0.0,
            "command": _command("bleu", REFERENCES_FILE, HYPOTHESES_FILE, width),
        },
        "chrf": {
            "label": CHRF_LABEL,
            "score": chrf_score.score,
            "signature": str(chrf.get_signature()),
            "command": _command("chrf", REFERENCES_FILE, HYPOTHESES_FILE, width),
        },
        "tokenized_bleu_compound_split": {
            "label": TOKENIZED_BLEU_LABEL,
            "score": tok_score.score,
            "signature": str(tok_bleu.get_signature()),
            "verbose": str(tok_score),
            "command": _command(
                "bleu", TOKENIZED_REFERENCES_FILE, TOKENIZED_HYPOTHESES_FILE, width, "--tokenize", "none",
                "--force"
            ),
            "preprocessing": "Moses replace-unicode-punctuation, sacreBLEU 13a tokenizer, "
            "s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g",
        },
    }


# ------------------------------------------------------------------------------ evaluation


def _make_translator(translator, tokenizer):
    if hasattr(translator, "translate"):
        return translator
    if tokenizer is None:
        raise TypeError("evaluate() got a model without a tokenizer; pass tokenizer=... or a Translator")
    from keras_transformer.decoding.translator import Translator

    return Translator(translator, tokenizer)


def extra_splits(config: EvalConfig, split: str, corpus: Corpus) -> tuple[str, ...]:
    """The splits scored after ``split``: ``config.extra_splits``, or by default (``None``) the
    corpus' other test splits when ``split`` is ``test``. Raises if a named one is missing."""
    if config.extra_splits is None:
        return tuple(s for s in corpus.splits if s.startswith("test") and s != split) if split == "test" else ()
    missing = [s for s in config.extra_splits if s not in corpus.splits]
    if missing:
        raise ValueError(f"{corpus.directory} has no split {missing}; it has {list(corpus.splits)}")
    return tuple(s for s in config.extra_splits if s != split)


def _write_scores(output_dir: Path, scores: dict[str, Any]) -> None:
    atomic_write_bytes(output_dir / SCORES_FILE,
                       (json.dumps(scores, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def evaluate(
    translator,
    corpus: Corpus,
    split: str | None = None,
    config: EvalConfig | None = None,
    output_dir: str | Path = "evaluation",
    tokenizer=None,
) -> EvalResult:
    """Translates ``split`` of ``corpus`` (and :func:`extra_splits`), writes the files and scores.

    Args:
        translator: a ``Translator``, a loaded export (``keras_transformer.decoding.export.load_exported``)
            or a ``Transformer`` together with ``tokenizer``.
        corpus: the prepared corpus; source and target languages are its own.
        split: overrides ``config.split``.
        output_dir: receives ``sources.txt``, ``hypotheses.txt``, ``references.txt``, the
            tokenized ``*.tok.atat.txt`` files of the paper-style BLEU and ``scores.json``; each
            extra split the same files in ``output_dir/<split>``, summed up in ``scores.json``'s
            ``other_splits``.
    """
    config = config or EvalConfig()
    split = split or config.split
    output_dir = Path(output_dir)
    others = extra_splits(config, split, corpus)  # before decoding: a missing split fails at once
    translator = _make_translator(translator, tokenizer)
    result = _evaluate_split(translator, corpus, split, config, output_dir, config.attention_examples)
    for other in others:
        result.others[other] = _evaluate_split(translator, corpus, other, config, output_dir / other,
                                               config.attention_examples)
    if result.others:
        result.scores["other_splits"] = {
            other: {"num_sentences": r.num_sentences, "bleu": r.bleu, "chrf": r.chrf,
                    "brevity_penalty": r.scores["bleu"]["brevity_penalty"],
                    "length_ratio": r.scores["bleu"]["length_ratio"],
                    "looping_hypotheses": r.scores["loops"]["hypotheses"],
                    "looping_references": r.scores["loops"]["references"],
                    "scores": f"{other}/{SCORES_FILE}"}
            for other, r in result.others.items()}
        _write_scores(output_dir, result.scores)
    return result


def _evaluate_split(translator, corpus: Corpus, split: str, config: EvalConfig, output_dir: Path,
                    attention_examples: int = 0) -> EvalResult:
    """One split: decode, write the files (and the attention of ``attention_examples`` best and
    worst sentences), score them, write ``scores.json``."""
    output_dir.mkdir(parents=True, exist_ok=True)
    pairs = list(corpus.pairs(split))
    if config.max_sentences is not None:
        pairs = pairs[: config.max_sentences]
    if not pairs:
        raise ValueError(f"split {split!r} of {corpus.directory} has no sentences")
    sources = [clean_line(s) for s, _ in pairs]
    references = [clean_line(t) for _, t in pairs]
    logger.info("evaluating on %d %s sentences of %s", len(pairs), split, corpus.language_pair)
    decoded, decoding = decode(translator, sources, config.decoding, config.batch_size)
    hypotheses = [clean_line(h) for h in decoded]
    if len(hypotheses) != len(sources):
        raise RuntimeError(f"translator returned {len(hypotheses)} translations for {len(sources)} sentences")

    write_lines(output_dir / SOURCES_FILE, sources)
    write_lines(output_dir / REFERENCES_FILE, references)
    write_lines(output_dir / HYPOTHESES_FILE, hypotheses)
    write_lines(output_dir / TOKENIZED_HYPOTHESES_FILE, [clean_line(paper_tokenize(h)) for h in hypotheses])
    write_lines(output_dir / TOKENIZED_REFERENCES_FILE, [clean_line(paper_tokenize(r)) for r in references])
    table = sentence_table(sources, references, hypotheses)
    write_table(output_dir, table)
    draw_attention(translator, table, output_dir, attention_examples)

    scores = score_files(output_dir)
    repeated = [i for i, h in enumerate(hypotheses) if ends_in_repetition(h)]
    scores["repeated_endings"] = {"count": len(repeated), "lines": [i + 1 for i in repeated[:50]]}
    scores["loops"] = loop_counts(hypotheses, references)
    scores["evaluation"] = {
        "split": split,
        "language_pair": corpus.language_pair,
        "num_sentences": len(pairs),
        "corpus_fingerprint": corpus.fingerprint(split),
        "config": dataclasses.asdict(config),
        "decoding": decoding,
        # What decoded in place of our beam search (a CTranslate2 export's engine options), if anything.
        **({"engine": translator.engine_record()} if hasattr(translator, "engine_record") else {}),
        "files": {
            "sources": SOURCES_FILE,
            "hypotheses": HYPOTHESES_FILE,
            "references": REFERENCES_FILE,
            "tokenized_hypotheses": TOKENIZED_HYPOTHESES_FILE,
            "tokenized_references": TOKENIZED_REFERENCES_FILE,
            "sentences": TABLE_FILE,
        },
    }
    _write_scores(output_dir, scores)
    result = EvalResult(
        output_dir=output_dir,
        num_sentences=len(pairs),
        bleu=scores["bleu"]["score"],
        chrf=scores["chrf"]["score"],
        tokenized_bleu=scores["tokenized_bleu_compound_split"]["score"],
        scores=scores,
    )
    logger.info(
        "%s: %s %.2f (BP %.3f) | %s %.2f | tokenized BLEU (compound split) %.2f | loops %d (references %d)  [%s]",
        split,
        BLEU_LABEL,
        result.bleu,
        scores["bleu"]["brevity_penalty"],
        CHRF_LABEL,
        result.chrf,
        result.tokenized_bleu,
        scores["loops"]["hypotheses"],
        scores["loops"]["references"],
        scores["bleu"]["signature"],
    )
    return result
