"""The parsing task's evaluation stage: beam-search parses, repaired into trees, scored like EVALB.

Section 6.3 decodes with beam 21, alpha 0.3 and a maximum output length of input + 300 (the
``parser`` presets' decoding settings, used unless the config overrides them). Every decoded
sequence becomes a tree over exactly the sentence's words (:func:`.linearize.repair`), so every
sentence is scored; how many needed repair is reported. Two baselines are scored by the same
scorer on the same gold trees, so a reader can tell a parser from a bracket counter:
right-branching trees (over the gold tags) and the gold trees with every label replaced by the
most frequent one.

Files written to ``output_dir``: ``sources.txt``, ``decoded.txt`` (raw model output),
``gold.trees``, ``predicted.trees`` (one tree per line, ready for ``parse-eval`` or ``evalb``),
``per_sentence.jsonl`` and ``scores.json``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, ClassVar

from keras_transformer.files import atomic_write_bytes
from pipelines.config import SettingError
from pipelines.corpus import SPLITS, Corpus
from pipelines.decoding import MOVED_TO_DECODING, PARSE_DECODING, ParseDecodingOverrides

from .evalb import CUTOFF_LEN, most_frequent_label_baseline, right_branching, score_trees
from .linearize import best_tree, delinearize, tree_constraint

logger = logging.getLogger(__name__)

SCORES_FILE = "scores.json"
SUMMARY_KEYS = ("fmeasure", "recall", "precision", "complete_match", "tagging_accuracy")


@dataclasses.dataclass
class ParseEvalConfig:
    """Settings of the parsing evaluation stage.

    The record holds EVALB's own figures too (``evalb``), for comparison with published ones.
    """

    removed_settings: ClassVar[dict[str, str]] = {
        name: why for name, why in MOVED_TO_DECODING.items() if not why.startswith("now decoding.")
        or why.removeprefix("now decoding.") in PARSE_DECODING}

    #: The split parsed and scored.
    split: str = "test"
    #: Overrides of the preset's beam search by the preset's names (the parser presets: section 6.3's beam 21, length
    #: penalty 0.3, +300; a span parser's chart search takes none).
    decoding: ParseDecodingOverrides = dataclasses.field(default_factory=ParseDecodingOverrides)
    #: Sentences decoded together.
    batch_size: int = 16
    #: Parse only the first sentences of the split (quick checks).
    max_sentences: int | None = None
    #: The sentence length of EVALB's second summary (``len<=40``).
    cutoff_len: int = CUTOFF_LEN
    #: ``gold`` deletes punctuation by the gold tags, so a tree that tags a comma ``NN`` is still scored; ``each`` by
    #: each tree's own tags, as EVALB does, leaving such a sentence out of the totals.
    punctuation: str = "gold"
    #: The beam search builds only trees over the sentence's words (an export carries the same constraint in its
    #: graph).
    constrained: bool = True

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise SettingError(self, "split", f"must be one of {list(SPLITS)}")
        if self.punctuation not in ("each", "gold"):
            raise SettingError(self, "punctuation", "must be 'each' or 'gold'")
        if isinstance(self.decoding, dict):  # built in code rather than read by from_dict
            self.decoding = ParseDecodingOverrides(**self.decoding)
        for name in ("batch_size", "max_sentences"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SettingError(self, name, "must be positive")


def _write_lines(path: Path, lines: list[str]) -> None:
    atomic_write_bytes(path, "".join(f"{line}\n" for line in lines).encode("utf-8"))


def _summary(scores: dict, cutoff_len: int) -> dict[str, dict]:
    return {key: scores[key] for key in ("all", f"len<={cutoff_len}")}


def parse_sentences(translator, sentences: list[str], constrained: bool = True,
                    **decode: Any) -> tuple[list[str], list[Any], int]:
    """Best decoded sequences, trees over each sentence's words, and how many needed repair.

    Each tree is the best beam hypothesis that is a tree over the words (:func:`.linearize.best_tree`).
    With ``constrained`` and a translator that exposes its model and vocabulary (a
    ``Translator``, not an export), the beam search itself only builds such trees
    (:func:`.linearize.tree_constraint`: one slot per word, balanced and matching brackets).
    """
    extra: dict[str, Any] = {}
    if constrained and hasattr(translator, "target_tokenizer") and hasattr(translator, "model"):
        extra = {"constraint": _constraint(translator),
                 "slots": [len(sentence.split()) for sentence in sentences]}
    n_best = translator.translate(sentences, n_best=True, **decode, **extra)
    trees, repaired = [], 0
    for sentence, hypotheses in zip(sentences, n_best):
        tree, was_repaired = best_tree(hypotheses, sentence.split())
        trees.append(tree)
        repaired += was_repaired
    return [hypotheses[0] if hypotheses else "" for hypotheses in n_best], trees, repaired


#: One constraint per target vocabulary: the compiled constrained search is cached per constraint
#: object, so a new one per call would trace the beam search again.
_CONSTRAINTS: dict[tuple[str, int], Any] = {}


def tree_constraint_for(target_tokenizer, eos_id: int):
    """The tree constraint of a target vocabulary, one object per vocabulary."""
    key = (target_tokenizer.fingerprint, int(eos_id))
    if key not in _CONSTRAINTS:
        _CONSTRAINTS[key] = tree_constraint(target_tokenizer, key[1])
    return _CONSTRAINTS[key]


def _constraint(translator):
    return tree_constraint_for(translator.target_tokenizer, translator.model.config.eos_id)


def evaluate_parser(translator, corpus: Corpus, config: ParseEvalConfig | None = None,
                    output_dir: str | Path = "evaluation") -> dict[str, Any]:
    """Parses ``config.split`` of ``corpus``, scores it and the baselines, writes the files.

    Returns the content of ``scores.json``: ``"all"`` and ``"len<=40"`` sections as
    :func:`.evalb.score_trees` gives them, ``valid_before_repair`` / ``repaired`` counts,
    ``baselines``, three ``examples`` (sentence, gold and predicted tree) and the ``evaluation``
    record (split, decoding settings, corpus fingerprint).
    """
    config = config or ParseEvalConfig()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    pairs = list(corpus.pairs(config.split))[: config.max_sentences]
    if not pairs:
        raise ValueError(f"split {config.split!r} of {corpus.directory} has no sentences")
    sentences = [source for source, _ in pairs]
    gold = [delinearize(target, source.split()) for source, target in pairs]
    overrides = config.decoding.to_dict()
    decoding = translator.decoding_record(**overrides)  # before decoding: an export refuses at once
    logger.info("parsing %d %s sentences (%s)", len(pairs), config.split,
                ", ".join(f"{name} {value}" for name, value in decoding.items()))
    decoded, predicted, repaired = parse_sentences(translator, sentences, config.constrained,
                                                   batch_size=config.batch_size, **overrides)

    scores = score_trees(gold, predicted, cutoff_len=config.cutoff_len, punctuation=config.punctuation)
    baselines = {
        "right_branching": score_trees(gold, [right_branching(t.words(), t.tags()) for t in gold],
                                       cutoff_len=config.cutoff_len, punctuation=config.punctuation),
        "most_frequent_label": score_trees(gold, most_frequent_label_baseline(gold),
                                           cutoff_len=config.cutoff_len, punctuation=config.punctuation),
    }
    _write_lines(output_dir / "sources.txt", sentences)
    _write_lines(output_dir / "decoded.txt", decoded)
    _write_lines(output_dir / "gold.trees", [t.to_string() for t in gold])
    _write_lines(output_dir / "predicted.trees", [t.to_string() for t in predicted])
    _write_lines(output_dir / "per_sentence.jsonl", [json.dumps(r) for r in scores["per_sentence"]])
    evalb = scores if config.punctuation == "each" else score_trees(
        gold, predicted, cutoff_len=config.cutoff_len, punctuation="each")
    record = {
        **_summary(scores, config.cutoff_len),
        "evalb": _summary(evalb, config.cutoff_len),
        # Every scored tree is well formed (repair guarantees it); what tells a parser from a
        # repair routine is how many of its own best hypotheses were trees before repair.
        "valid_before_repair": len(predicted) - repaired,
        "repaired": repaired,
        "examples": [{"source": s, "reference": g.to_string(), "translation": p.to_string()}
                     for s, g, p in list(zip(sentences, gold, predicted))[:3]],
        "baselines": {name: _summary(result, config.cutoff_len) for name, result in baselines.items()},
        "evaluation": {
            "split": config.split,
            "num_sentences": len(pairs),
            "corpus_fingerprint": corpus.fingerprint(config.split),
            "config": dataclasses.asdict(config),
            "decoding": decoding,
        },
    }
    atomic_write_bytes(output_dir / SCORES_FILE, (json.dumps(record, indent=2) + "\n").encode("utf-8"))
    overall = record["all"]
    logger.info("labelled F1 %.2f (R %.2f, P %.2f), exact match %.2f, tagging %.2f on %d sentences; "
                "%d repaired; right-branching F1 %.2f", overall["fmeasure"], overall["recall"],
                overall["precision"], overall["complete_match"], overall["tagging_accuracy"], len(pairs),
                repaired, record["baselines"]["right_branching"]["all"]["fmeasure"])
    return record


def metrics(record: dict[str, Any], cutoff_len: int = CUTOFF_LEN) -> dict[str, float]:
    """Flat numbers of :func:`evaluate_parser`'s record for a metrics logger."""
    flat = {("f1" if key == "fmeasure" else key): record["all"][key] for key in SUMMARY_KEYS}
    flat.update({f"len{cutoff_len}_f1": record[f"len<={cutoff_len}"]["fmeasure"],
                 "evalb_f1": record["evalb"]["all"]["fmeasure"],
                 "evalb_error_sentences": record["evalb"]["all"]["error_sentences"],
                 "error_sentences": record["all"]["error_sentences"], "repaired": record["repaired"],
                 "valid_before_repair": record["valid_before_repair"]})
    for name, baseline in record["baselines"].items():
        flat[f"baseline_{name}_f1"] = baseline["all"]["fmeasure"]
    return flat


def headline(record: dict[str, Any]) -> str:
    """One line a user reads first: F1, tagging, the trivial baselines and the trees left to repair."""
    overall, baselines = record["all"], record["baselines"]
    total = record["valid_before_repair"] + record["repaired"]
    return (f"labelled F1 {overall['fmeasure']:.2f}, tagging accuracy {overall['tagging_accuracy']:.2f}%, "
            f"exact match {overall['complete_match']:.2f}% on {total} {record['evaluation']['split']} sentences "
            f"({record['valid_before_repair']} decoded as valid trees, {record['repaired']} repaired); "
            f"baselines: right-branching F1 {baselines['right_branching']['all']['fmeasure']:.2f}, "
            f"most frequent label F1 {baselines['most_frequent_label']['all']['fmeasure']:.2f}")
