"""The ``synthesize`` stage: a teacher translates untranslated text into synthetic pairs for a student.

A trained model's translations of text no translator reached are training pairs for the next model:
forward-translation / self-training when the teacher translates the student's own direction
(He et al., ICLR 2020, "Revisiting Self-Training for Neural Sequence Generation"), sequence-level
distillation when the text is the training sources themselves (Kim & Rush, 2016). The teacher is an
export (:mod:`keras_transformer.decoding.export`; the CTranslate2 int8 export is the fastest the project
has) or, through the flow's task (:mod:`flows.synthesis`), a registered model by alias
(``models:/NAME@champion``, whose export is downloaded); it decodes
as the evaluation decodes, with its own settings (sentence by sentence where the preset says so).

The pool (:mod:`pipelines.tasks.translation.pool`) is translated in shards of ``shard_size`` lines, each
written whole (to a temporary file, then renamed): a stopped synthesis resumes at the first shard not
written, and a finished one is not redone. The pairs are then filtered, and each reason counted:

- ``empty``: no translation;
- ``loops``: the translation repeats an n-gram three times in a row (:mod:`keras_transformer.decoding.loops`);
- ``copies_source``: the translation is the source again (case aside), for a source of ``copy_min_words``
  words or more (a one-word name is rightly copied);
- ``length_ratio``: the ratio of target to source words (each + 1) lies outside the central
  ``length_ratio_coverage`` of the real pairs' ratios (the parallel corpus' ``train`` split).

What is kept is written as ``synthetic.<src>`` / ``synthetic.<tgt>`` (a line each), with ``synthesis.json``
(teacher, pool, counts, the ratio bounds, seconds).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.config import ConfigError, SettingError
from pipelines.corpus import Corpus, lines_to_bytes
from pipelines.progress import Progress
from pipelines.tasks.translation.pool import PoolConfig, load_pool, pool_files
from pipelines.textfiles import DataError, read_lines

logger = logging.getLogger(__name__)

REASONS = ("empty", "loops", "copies_source", "length_ratio")
MANIFEST = "synthesis.json"
SHARDS = "shards"
#: The bundled En-De corpus: the real pairs' length ratios, and what a folder pool is filtered against.
DEFAULT_CORPUS = Path(__file__).resolve().parent / "corpora" / "ddtp" / "en-de"


@dataclasses.dataclass
class SynthesisConfig:
    """Settings of the ``synthesize`` stage (the pipeline config's ``synthesize`` section)."""

    #: The teacher: ``models:/NAME@ALIAS`` (a registered model; ``tracking_uri`` names the registry) or an
    #: export directory.
    teacher: str | None = None
    #: The untranslated text (``pool.source: ddtp`` or ``folder``).
    pool: PoolConfig = dataclasses.field(default_factory=PoolConfig)
    #: The real pairs (a prepared corpus directory): their length ratios bound the synthetic ones'.
    corpus: str = str(DEFAULT_CORPUS)
    #: Where the shards, the pairs and ``synthesis.json`` go.
    output_dir: str = "runs/synthetic"
    #: The MLflow tracking (and registry) URI a ``models:/`` teacher is found in (by the flow); null: MLflow's
    #: default.
    tracking_uri: str | None = None
    #: Pool lines per shard (what a resumed synthesis redoes at most).
    shard_size: int = 2000
    #: The engine's threads (0: one per core).
    threads: int = 0
    #: Paragraphs per call of the teacher.
    batch_size: int = 64
    #: The central fraction of the real pairs' length ratios a synthetic pair must fall in.
    length_ratio_coverage: float = 0.98
    #: A translation equal to its source is dropped when the source has at least this many words.
    copy_min_words: int = 3

    def __post_init__(self) -> None:
        if not self.teacher or not isinstance(self.teacher, str):
            raise SettingError(self, "teacher", "name the teacher: models:/NAME@ALIAS or an export directory")
        if isinstance(self.pool, dict):
            self.pool = PoolConfig(**self.pool)
        for name in ("shard_size", "batch_size", "copy_min_words"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingError(self, name, "must be a positive integer")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 0:
            raise SettingError(self, "threads", "must be 0 (one per core) or a positive integer")
        if not 0 < self.length_ratio_coverage <= 1:
            raise SettingError(self, "length_ratio_coverage", "must be a fraction in (0, 1]")


@dataclasses.dataclass
class SynthesisResult:
    """What the stage wrote: the pairs' files, how many were kept and dropped (per reason), the teacher."""

    output_dir: str
    source_file: str
    target_file: str
    teacher: str
    pool_lines: int
    kept: int
    dropped: dict[str, int]
    seconds: float
    digest: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------ the teacher


def resolve_teacher(teacher: str) -> Path:
    """The teacher's export directory; one line naming the teacher when it does not exist or is not an export.
    A registered model (``models:/NAME@ALIAS``) is found by the flow's task (:mod:`flows.synthesis`), which
    passes its resolver to :func:`run_synthesis`."""
    from keras_transformer.decoding.export import is_exported_translator

    if teacher.startswith("models:/"):
        raise ConfigError(f"teacher {teacher}: a registered model is found by the synthesize task of the flows "
                          "(flows.synthesis); the stage alone takes an export directory")
    path = Path(teacher).expanduser()
    if not path.exists():
        raise DataError(f"teacher {teacher}: no such export directory")
    if not is_exported_translator(path):
        raise DataError(f"teacher {teacher}: not a translator export (no assets.extra/translator.json)")
    return path


def teacher_identity(path: Path) -> str:
    """A hash of what decides the teacher's translations: its weights and its recorded settings."""
    digest = hashlib.sha256()
    for name in ("model.bin", "assets.extra/translator.json", "saved_model.pb"):
        if (path / name).is_file():
            with open(path / name, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------ the filters


def length_ratio_bounds(corpus: Corpus, coverage: float) -> tuple[float, float]:
    """The central ``coverage`` of the train pairs' (target words + 1) / (source words + 1)."""
    ratios = np.fromiter(((len(t.split()) + 1) / (len(s.split()) + 1) for s, t in corpus.pairs("train")), float)
    tail = (1 - coverage) / 2
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail))


def drop_reason(source: str, translation: str, bounds: tuple[float, float], copy_min_words: int) -> str | None:
    """Why a synthetic pair is dropped (one of :data:`REASONS`), or None to keep it."""
    from keras_transformer.decoding.loops import repeated_ngram

    if not translation.strip():
        return "empty"
    if repeated_ngram(translation) is not None:
        return "loops"
    words = len(source.split())
    if words >= copy_min_words and " ".join(translation.split()).casefold() == " ".join(source.split()).casefold():
        return "copies_source"
    ratio = (len(translation.split()) + 1) / (words + 1)
    if not bounds[0] <= ratio <= bounds[1]:
        return "length_ratio"
    return None


# ------------------------------------------------------------------ the stage


def check_synthesis(config: SynthesisConfig, resolve: Callable[[str], Path] = resolve_teacher
                    ) -> tuple[Path, list[Path]]:
    """Everything that can be wrong before any work: the pool's files (text) and the teacher (found by
    ``resolve``, an export). Returns the teacher's export directory and the pool's files."""
    files = pool_files(config.pool)
    if not Path(config.corpus).is_dir():
        raise DataError(f"synthesize.corpus {config.corpus}: no such corpus directory")
    return resolve(config.teacher), files


def run_synthesis(config: SynthesisConfig, resolve: Callable[[str], Path] = resolve_teacher) -> SynthesisResult:
    """Translates the pool with the teacher (resuming at the first shard not written), filters the pairs and
    writes them; a finished synthesis of the same teacher, pool and settings is read back, not redone."""
    from keras_transformer.decoding.export import load_exported

    start = time.perf_counter()
    export, _ = check_synthesis(config, resolve)
    corpus = Corpus.load(config.corpus)
    lines = load_pool(config.pool, corpus)
    if not lines:
        raise DataError(f"the pool ({config.pool.source}) holds no line to translate after filtering")
    output = Path(config.output_dir)
    shards = output / SHARDS
    identity = {"teacher": teacher_identity(export), "pool": _digest(lines), "shard_size": config.shard_size}
    _reset_if_other(shards, identity)
    count = -(-len(lines) // config.shard_size)
    todo = [k for k in range(count) if not _shard_path(shards, k).is_file()]
    if todo:
        logger.info("synthesizing %d of %d shards of %d lines with %s", len(todo), count, config.shard_size, export)
        teacher = load_exported(export, threads=config.threads)
        with Progress("synthesize", total=len(lines), unit="lines") as progress:
            progress.update(len(lines) - sum(len(lines[k * config.shard_size : (k + 1) * config.shard_size])
                                             for k in todo))
            for k in todo:
                part = lines[k * config.shard_size : (k + 1) * config.shard_size]
                translations = teacher.translate(part, batch_size=config.batch_size)
                _write_atomic(_shard_path(shards, k), lines_to_bytes(translations))
                progress.update(len(part))
    translations = [t for k in range(count) for t in read_lines(_shard_path(shards, k))]
    bounds = length_ratio_bounds(corpus, config.length_ratio_coverage)
    dropped = dict.fromkeys(REASONS, 0)
    kept: list[tuple[str, str]] = []
    for source, translation in zip(lines, translations, strict=True):
        reason = drop_reason(source, translation, bounds, config.copy_min_words)
        if reason:
            dropped[reason] += 1
        else:
            kept.append((source, translation))
    src, tgt = corpus.source_lang, corpus.target_lang
    files = {lang: output / f"synthetic.{lang}" for lang in (src, tgt)}
    for path, side in zip(files.values(), ([s for s, _ in kept], [t for _, t in kept])):
        _write_atomic(path, lines_to_bytes(side))
    result = SynthesisResult(str(output), str(files[src]), str(files[tgt]), config.teacher, len(lines), len(kept),
                             dropped, round(time.perf_counter() - start, 2),
                             _digest([f"{s}\t{t}" for s, t in kept]))
    manifest = {**result.to_dict(), "teacher_export": str(export), "identity": identity,
                "length_ratio_bounds": bounds, "pool": dataclasses.asdict(config.pool)}
    (output / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", "utf-8")
    logger.info("synthetic pairs: %d kept of %d; dropped %s", len(kept), len(lines),
                ", ".join(f"{k} {v}" for k, v in dropped.items()))
    return result


def read_synthetic(output_dir: str | Path) -> list[tuple[str, str]]:
    """The synthetic pairs a finished synthesis wrote, in pool order."""
    manifest = json.loads((Path(output_dir) / MANIFEST).read_text("utf-8"))
    return list(zip(read_lines(manifest["source_file"]), read_lines(manifest["target_file"]), strict=True))


def synthesis_digest(output_dir: str | Path) -> str:
    """The hash of the synthetic pairs a finished synthesis wrote (its manifest's)."""
    return json.loads((Path(output_dir) / MANIFEST).read_text("utf-8"))["digest"]


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def _shard_path(shards: Path, k: int) -> Path:
    return shards / f"shard-{k:05d}.txt"


def _reset_if_other(shards: Path, identity: dict[str, Any]) -> None:
    """Shards of another teacher, pool or shard size are not this synthesis' part: removed."""
    stamp = shards / "identity.json"
    if stamp.is_file() and json.loads(stamp.read_text("utf-8")) == identity:
        return
    if shards.is_dir():
        for path in shards.glob("shard-*.txt"):
            path.unlink()
    shards.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(identity, sort_keys=True), "utf-8")


def _write_atomic(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)
