"""Training of the SentencePiece subword vocabulary (paper Section 5.1: shared source-target BPE).

"Sentences were encoded using byte-pair encoding, which has a shared source-target vocabulary of
about 37000 tokens" (En-De). :func:`train_tokenizer` trains a SentencePiece BPE model on both
sides of the training split (or one model per side when ``shared=False``); the model is then run
in-graph by :class:`keras_transformer.tokenizer.SubwordTokenizer`.

Settings that make the tokenizer exact and robust:

* special ids ``pad=0``, ``unk=1``, ``bos=2``, ``eos=3`` (the project convention);
* ``byte_fallback=True``: characters outside the vocabulary become UTF-8 byte pieces, so nothing
  maps to ``unk`` and every string survives a round trip;
* normalization rule ``identity``: the corpus is already NFKC-normalized with collapsed
  whitespace by :mod:`pipelines.tasks.translation.cleaning`, so ``detokenize(tokenize(s)) == s`` exactly, which
  BLEU on detokenized output relies on;
* ``verbatim``: URLs, e-mail addresses and file paths are one placeholder piece on both sides
  (:mod:`keras_transformer.text`), copied from the source into the translation, not spelt out of
  subwords; the vocabulary learns from the text around them, not from their fragments;
* a sample of at most ``input_sentence_size`` lines (SentencePiece's seeded reservoir sample,
  :func:`sample_lines`): WMT14's 9M lines train in the memory of the sample; the sample is logged
  and recorded beside the model.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import sentencepiece as spm

from keras_transformer.files import atomic_write_bytes
from pipelines.config import DROPPED, ConfigError, SettingError, removed
from pipelines.corpus import Corpus, sha256_bytes
from pipelines.progress import counted, heartbeat
from pipelines.vocabulary import Vocabulary

if TYPE_CHECKING:
    from keras_transformer.tokenizer import SubwordTokenizer

logger = logging.getLogger(__name__)

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
#: What the target side's model may set apart from the source's (``tokenizer.target``): the rest (the sample,
#: the threads, ``verbatim``, whose placeholders are filled from the source) is the same for both sides.
TARGET_SETTINGS = ("vocab_size", "model_type", "character_coverage", "byte_fallback", "normalization_rule_name")


@dataclasses.dataclass
class TokenizerConfig:
    """Settings of SentencePiece training (names follow ``spm_train`` where they exist)."""

    #: Pieces in the vocabulary, with the 4 special ids and (``byte_fallback``) 256 byte pieces; the paper's ~37000 is
    #: shared, the CPU presets use a few thousand. A ``word`` model's is a cap: it keeps the symbols that occur.
    vocab_size: int = 8000
    #: ``bpe``, ``unigram``, ``char`` or ``word`` (the parse trees' brackets and tags are whole symbols).
    model_type: str = "bpe"
    #: The share of characters the vocabulary covers; null: 0.9995 for subword models, 1.0 for ``word`` models (a tree
    #: symbol of a rare letter, ``EX`` or ``-LRB-``, would be unknown).
    character_coverage: float | None = None
    #: Train on at most this many sentences, sampled with ``seed``.
    input_sentence_size: int = 1_000_000
    #: Seed of that sample.
    seed: int = 0
    #: One vocabulary for source and target (section 3.4); false: two, the target's settings differing by ``target``
    #: (parsing).
    shared: bool = True
    #: Characters outside the vocabulary become byte pieces instead of ``<unk>``.
    byte_fallback: bool = True
    #: SentencePiece's normalisation rule (``identity``: the text as the cleaning left it).
    normalization_rule_name: str = "identity"
    #: Threads of SentencePiece's training.
    num_threads: int = 2
    #: URLs, e-mail addresses and paths become one placeholder piece, which the Translator and the export fill with
    #: the source's span (the translation configs).
    verbatim: bool = False
    #: With ``shared: false``: the target side's settings that differ, e.g. ``{model_type: word, vocab_size: 200}``
    #: for the parse trees (``tokenizer.target``).
    target: dict[str, Any] | None = None

    #: Settings taken out of the product: a config naming one fails saying so.
    removed_settings: ClassVar[dict[str, str]] = {"verbatim_identifiers": DROPPED}

    def __post_init__(self) -> None:
        if self.target:
            gone = removed(type(self), self.target)
            if gone is not None:
                raise SettingError(self, "target", f"{gone[0]}{gone[1]}", at=gone[0])
            if self.shared:
                raise SettingError(self, "target", "needs shared: false (one vocabulary has one model)")
            unknown = sorted(set(self.target) - {f.name for f in dataclasses.fields(self)})
            if unknown:
                raise SettingError(self, "target", f"unknown setting(s) {unknown}")
            same = sorted(set(self.target) - set(TARGET_SETTINGS))
            if same:
                raise SettingError(self, "target", f"{same} cannot differ between the sides; the target's model sets "
                                                   f"{', '.join(TARGET_SETTINGS)}")
            try:
                self.target_side()  # checks the target's settings now, not after the source's training
            except SettingError as err:
                raise err.nested_in("target") from err
        for name in ("input_sentence_size", "num_threads"):
            if getattr(self, name) < 1:  # SentencePiece reads input_sentence_size 0 as "every sentence"
                raise SettingError(self, name, "must be a positive integer")
        if self.seed < 0:
            raise SettingError(self, "seed", "must be >= 0 (SentencePiece's seed is unsigned)")
        if self.model_type not in ("bpe", "unigram", "char", "word"):
            raise SettingError(self, "model_type", "expected bpe, unigram, char or word")
        minimum = 4 + (256 if self.byte_fallback else 0) + 1
        if self.vocab_size < minimum:
            raise SettingError(self, "vocab_size", f"must be at least {minimum} with these settings")
        if self.character_coverage is not None and not 0 < self.character_coverage <= 1:
            raise SettingError(self, "character_coverage", "must be in (0, 1]")

    def target_side(self) -> TokenizerConfig:
        """The settings of the target side's model."""
        return dataclasses.replace(self, target=None, **(self.target or {}))


def _trainer_kwargs(config: TokenizerConfig) -> dict:
    # TensorFlow: imported when training, not with the config
    from keras_transformer.text import VERBATIM

    word = config.model_type == "word"
    return dict(
        vocab_size=config.vocab_size,
        model_type=config.model_type,
        character_coverage=config.character_coverage or (1.0 if word else 0.9995),
        input_sentence_size=config.input_sentence_size,
        shuffle_input_sentence=True,
        byte_fallback=config.byte_fallback,
        normalization_rule_name=config.normalization_rule_name,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        pad_piece="<pad>",
        unk_piece="<unk>",
        bos_piece="<s>",
        eos_piece="</s>",
        num_threads=config.num_threads,
        # Long paragraphs are real training data here; the default (4192 bytes) would drop some.
        max_sentence_length=16384,
        # A word vocabulary holds what occurs; vocab_size only caps it.
        hard_vocab_limit=not word,
        user_defined_symbols=[VERBATIM] if config.verbatim else [],
    )


def _protected(sentences: Iterator[str], config: TokenizerConfig, batch: int = 4096) -> Iterator[str]:
    """``sentences`` as the tokenizer will see them: with ``verbatim``, spans as the placeholder
    (the in-graph op the tokenizer runs, so that training and use agree)."""
    if not config.verbatim:
        yield from sentences
        return
    from keras_transformer.text import protect

    while chunk := list(itertools.islice(sentences, batch)):
        yield from (line.decode("utf-8") for line in protect(chunk).numpy())


def _record_of(model_path: Path) -> dict | None:
    """The ``.json`` record beside ``model_path`` when the model is the one it records (None: no
    model, or one left half-written or damaged, which training may replace)."""
    meta_path = model_path.with_suffix(".json")
    if not (model_path.is_file() and meta_path.is_file()):
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(meta, dict) or meta.get("model_sha256") != sha256_bytes(model_path.read_bytes()):
        return None
    return meta


def _differences(recorded: dict, wanted: dict) -> str:
    """What tells the settings apart, for one line: ``vocab_size 8000, not 4000``."""
    keys = sorted(set(recorded) | set(wanted), key=str)
    return ", ".join(f"{key} {recorded.get(key)!r}, not {wanted.get(key)!r}"
                     for key in keys if recorded.get(key) != wanted.get(key))


def refuse_to_replace(model_path: Path, fingerprint: dict) -> None:
    """Raises :class:`ConfigError` if ``model_path`` is a tokenizer trained from other inputs than
    ``fingerprint`` (its settings, or its corpus files when ``fingerprint`` names them).

    A run's model is only good with the tokenizer it was trained with: retraining the one in
    place would leave every earlier run of the directory with a model that no longer matches its
    vocabulary. So a tokenizer is never replaced; a run with other settings takes another
    directory.
    """
    meta = _record_of(model_path)
    if meta is None:
        return
    recorded = meta.get("inputs") or {}
    if recorded.get("config") != fingerprint["config"]:
        why = f"with other settings ({_differences(recorded.get('config') or {}, fingerprint['config'])})"
    elif "files" in fingerprint and recorded.get("files") != fingerprint["files"]:
        why = f"on other data (the corpus's train files for {'/'.join(fingerprint['files'])} differ)"
    else:
        return
    raise ConfigError(f"{model_path}: trained {why}, and the earlier runs of this directory depend on it: "
                      f"give this run another run_dir, or the tokenizer settings it was trained with")


def check_existing(config: TokenizerConfig, output_dir: str | Path) -> None:
    """:func:`refuse_to_replace` for every tokenizer ``config`` would write in ``output_dir``, on
    the settings only (the corpus is not prepared yet): cheap enough to run before any work."""
    output_dir = Path(output_dir)
    names = ["spm_shared.model"] if config.shared else sorted(
        p.with_suffix(".model").name for p in output_dir.glob("spm_*.json") if p.stem != "spm_shared")
    for name in names:
        refuse_to_replace(output_dir / name, {"config": recorded_settings(config)})


def recorded_settings(config: TokenizerConfig) -> dict[str, Any]:
    """``config`` as a tokenizer's ``.json`` record holds it (what makes a model up to date)."""
    settings = dataclasses.asdict(config)
    if not settings["verbatim"]:  # the tokenizers trained before it stay up to date
        del settings["verbatim"]
    return settings


def sample_lines(corpus: Corpus, langs: tuple[str, ...], size: int, seed: int) -> tuple[Iterator[str], dict[str, Any]]:
    """The ``train`` lines of ``langs`` (one after the other, progress shown) that SentencePiece
    reads, and the sample it trains on: with more than ``size`` (``input_sentence_size``) lines,
    SentencePiece's reservoir sample of ``size`` of them, seeded by ``seed``; with fewer, all.

    The reservoir holds the sample alone, so memory is the sample's whatever the corpus; every
    line is still read once (linear time). Drawing the sample here instead would save reading it
    into SentencePiece, but give every existing vocabulary trained on more than ``size`` lines
    another model.
    """
    total = sum(corpus.manifest["files"][corpus.path("train", lang).name]["lines"] for lang in langs)

    def every_line() -> Iterator[str]:
        for lang in langs:
            yield from corpus.lines("train", lang)

    sampling = {"lines": total, "sampled": min(total, size), "seed": seed,
                "method": "all lines" if total <= size else "SentencePiece's reservoir sample (input_sentence_size)"}
    return counted(every_line(), "vocabulary: reading", total, "lines"), sampling


def _train_one(corpus: Corpus, langs: tuple[str, ...], config: TokenizerConfig, model_path: Path,
               fingerprint: dict) -> Path:
    """Trains one model on the ``train`` lines of ``langs`` unless ``model_path`` exists and was
    trained from the same inputs."""
    meta = _record_of(model_path)
    if meta is not None and meta.get("inputs") == fingerprint:
        logger.info("tokenizer %s is up to date; not retraining", model_path)
        return model_path
    refuse_to_replace(model_path, fingerprint)
    sentences, sampling = sample_lines(corpus, langs, config.input_sentence_size, config.seed)
    logger.info("training SentencePiece %s, vocab %d -> %s, on %s of the %s train lines of %s (%s, seed %d)",
                config.model_type, config.vocab_size, model_path, f"{sampling['sampled']:,}",
                f"{sampling['lines']:,}", "+".join(langs), sampling["method"], config.seed)
    spm.set_random_generator_seed(config.seed)
    model = io.BytesIO()
    with heartbeat(f"training SentencePiece {model_path.name}"):
        spm.SentencePieceTrainer.train(sentence_iterator=_protected(sentences, config), model_writer=model,
                                       minloglevel=2, **_trainer_kwargs(config))
    data = model.getvalue()
    atomic_write_bytes(model_path, data)
    vocab = spm.SentencePieceProcessor(model_proto=data)
    pieces = "".join(f"{vocab.id_to_piece(i)}\t{vocab.get_score(i)}\n"
                     for i in range(vocab.vocab_size()))
    atomic_write_bytes(model_path.with_suffix(".vocab"), pieces.encode("utf-8"))
    # Written last: its presence with matching hashes is what makes a rerun skip training.
    meta = {"inputs": fingerprint, "model_sha256": sha256_bytes(data), "sampling": sampling}
    atomic_write_bytes(model_path.with_suffix(".json"), json.dumps(meta, indent=2, sort_keys=True).encode())
    return model_path


def train_tokenizer(corpus: Corpus, config: TokenizerConfig, output_dir: str | Path) -> Vocabulary[Path]:
    """Trains the subword model(s) on the ``train`` split of ``corpus``.

    With ``config.shared`` one vocabulary for both sides, trained on their concatenation:
    ``Vocabulary(output_dir/spm_shared.model)``; otherwise ``Vocabulary(spm_<src>.model,
    spm_<tgt>.model)``. A ``.vocab`` listing and a ``.json`` record of the inputs sit beside each
    model; training is skipped when they match, and refused (:func:`refuse_to_replace`) when a
    model there was trained from other inputs.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    settings = recorded_settings(config)

    def fingerprint(langs: tuple[str, ...]) -> dict:
        return {"config": settings, "files": {lang: corpus.file_sha256("train", lang)
                                              for lang in langs}}

    if config.shared:
        langs = (corpus.source_lang, corpus.target_lang)

        return Vocabulary(_train_one(corpus, langs, config, output_dir / "spm_shared.model", fingerprint(langs)))

    for lang in (corpus.source_lang, corpus.target_lang):  # both, before either side is trained
        refuse_to_replace(output_dir / f"spm_{lang}.model", fingerprint((lang,)))

    def one_side(lang: str, side: TokenizerConfig) -> Path:
        return _train_one(corpus, (lang,), side, output_dir / f"spm_{lang}.model", fingerprint((lang,)))

    return Vocabulary(one_side(corpus.source_lang, config), one_side(corpus.target_lang, config.target_side()))


def load_tokenizers(models: Vocabulary[Path | str]) -> Vocabulary[SubwordTokenizer]:
    """The in-graph tokenizers of :func:`train_tokenizer`'s models (a shared one loaded once)."""
    from keras_transformer.tokenizer import SubwordTokenizer

    return models.map(SubwordTokenizer)


def vocabulary_record(tokenizers: Vocabulary[SubwordTokenizer]) -> dict[str, Any]:
    """What ties checkpoints to these vocabularies: their fingerprints and sizes.

    The record goes into ``model_config.json`` so that resuming and averaging refuse checkpoints
    trained with other vocabularies (one value each when shared, ``[source, target]`` lists if not).
    """
    if tokenizers.shared:
        return {"fingerprint": tokenizers.source.fingerprint, "size": tokenizers.source.vocab_size}
    source, target = tokenizers
    return {"fingerprint": [source.fingerprint, target.fingerprint], "size": [source.vocab_size, target.vocab_size]}


def main(argv: list[str] | None = None) -> int:
    """CLI: train the subword model(s) of a prepared corpus."""
    import argparse

    from pipelines.config import add_config_arguments, config_from_args

    parser = argparse.ArgumentParser(prog="python -m pipelines.tokenization",
                                     description=main.__doc__)
    parser.add_argument("corpus", type=Path, help="prepared corpus directory (manifest.json)")
    parser.add_argument("output_dir", type=Path)
    add_config_arguments(parser, TokenizerConfig)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config = config_from_args(TokenizerConfig, args)
    models = train_tokenizer(Corpus.load(args.corpus), config, args.output_dir)
    logger.info("tokenizer model(s): %s", ", ".join(str(path) for path in models.distinct()))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
