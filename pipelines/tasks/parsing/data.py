"""The parsing task's data stage: a treebank becomes a corpus of (words, linearised tree) pairs.

Section 6.3 trains on the WSJ part of the Penn Treebank; this stage reads it (or NLTK's sample of
it) with :mod:`.treebank`, splits it as the paper does (sections 02-21 / 22 / 23; the sample by
file, wsj_0001-0159 / 0160-0179 / 0180-0199) and writes the same corpus layout translation uses
(:mod:`pipelines.corpus`): source ``en`` = the words, target ``tree`` = :func:`.linearize.linearize`
of the tree. The dev split becomes the corpus's ``validation`` split.

The sample's licence is non-commercial, so it is never shipped: ``path`` names the user's copy.
Without a path the sample is fetched from nltk_data's public URL (a short probe first, so an
offline machine fails within seconds with the command that gets it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from pathlib import Path
from typing import Any

from keras_transformer.files import atomic_write_bytes
from pipelines.config import SettingError
from pipelines.corpus import prepared_provenance, require_network, sha256_file, write_corpus
from pipelines.prepared import refuse_other_settings
from pipelines.textfiles import DataError

from .linearize import linearize, source
from .treebank import HOW_TO_GET_SAMPLE, load_splits

logger = logging.getLogger(__name__)

SOURCE_LANG, TARGET_LANG = "en", "tree"
SAMPLE_URL = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/treebank.zip"
#: Corpus split names of the treebank's train / dev / test.
CORPUS_SPLITS = {"train": "train", "validation": "dev", "test": "test"}


@dataclasses.dataclass
class TreebankConfig:
    """Settings of the parsing task's data stage (the pipeline config's ``data`` section)."""

    #: The NLTK sample (``treebank.zip`` or its unpacked folder) or the LDC WSJ folder (holding ``00/`` .. ``24/``);
    #: null: the sample is fetched from ``url``.
    path: str | None = None
    #: Where the prepared corpus goes; null: ``data/treebank-<kind>`` under run_dir.
    output_dir: str | None = None
    #: Where the NLTK sample is fetched from when ``path`` is empty.
    url: str = SAMPLE_URL
    #: Seconds the download waits for an answer.
    network_timeout: float = 10.0
    #: Keep the first N training trees (quick trials); null: all.
    max_train_trees: int | None = None
    #: A malformed tree: ``raise`` stops, naming file and line; ``skip`` leaves it out, logs it and keeps its
    #: neighbours.
    on_error: str = "raise"

    def __post_init__(self) -> None:
        if self.on_error not in ("raise", "skip"):
            raise SettingError(self, "on_error", "must be 'raise' or 'skip'")
        if self.max_train_trees is not None and self.max_train_trees < 1:
            raise SettingError(self, "max_train_trees", "must be positive")

    @property
    def kind(self) -> str:
        """``wsj`` or ``sample``, for names (the directory's shape decides when reading)."""
        return "sample" if not self.path or "treebank" in Path(self.path).name.lower() else "wsj"


def _input_fingerprint(path: Path) -> str:
    """sha256 of the zip, or of the names and sizes of a folder's ``.mrg`` files (cheap, changes with edits)."""
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for file in sorted(path.rglob("*.mrg")):
        digest.update(f"{file.relative_to(path)}\t{file.stat().st_size}\t{file.stat().st_mtime_ns}\n".encode())
    return digest.hexdigest()


def fetch_sample(config: TreebankConfig, directory: Path) -> Path:
    """The sample's zip in ``directory``, fetched from ``config.url`` unless already there."""
    import urllib.request

    target = directory / "treebank.zip"
    if target.is_file():
        return target
    try:
        require_network([config.url], timeout=config.network_timeout, what="fetch the Penn Treebank sample",
                        hint=f"Offline, give data.path instead. {HOW_TO_GET_SAMPLE}")
    except ConnectionError as err:
        raise DataError(str(err)) from err
    logger.info("fetching the NLTK treebank sample from %s", config.url)
    with urllib.request.urlopen(config.url, timeout=60) as response:
        atomic_write_bytes(target, response.read())
    return target


def _request(config: TreebankConfig, path: Path) -> dict[str, Any]:
    """The settings that determine the output, and the treebank's fingerprint (``inputs``)."""
    request: dict[str, Any] = {**dataclasses.asdict(config), "path": str(path.resolve())}
    request.pop("output_dir")
    request["inputs"] = _input_fingerprint(path)
    return request


def check_prepared(config: TreebankConfig) -> None:
    """Raises :class:`~pipelines.config.ConfigError` if ``config.output_dir`` holds a corpus prepared
    with other settings (the treebank's own contents aside: an edited treebank is prepared again),
    as :func:`prepare_treebank` would refuse it; cheap enough to run before any work."""
    if not config.output_dir:
        return
    path = Path(config.path).expanduser() if config.path else Path(config.output_dir) / "treebank.zip"
    if not path.exists():
        return  # nothing the corpus could have been prepared from yet; the stage says what is missing
    refuse_other_settings(Path(config.output_dir), "treebank", _request(config, path), ignore=("inputs",))


def up_to_date(config: TreebankConfig) -> bool:
    """Whether ``config.output_dir`` holds a verified corpus of these settings and this treebank."""
    path = Path(config.path).expanduser() if config.path else Path(config.output_dir or ".") / "treebank.zip"
    return bool(config.output_dir) and path.exists() and _up_to_date(Path(config.output_dir), _request(config, path))


def prepare_treebank(config: TreebankConfig) -> Path:
    """Writes the corpus of ``config`` to ``config.output_dir`` unless it is there and current;
    one prepared with other settings is refused (:func:`check_prepared`)."""
    if not config.output_dir:
        raise ValueError("TreebankConfig.output_dir is not set")
    output_dir = Path(config.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    path = Path(config.path).expanduser() if config.path else fetch_sample(config, output_dir)
    if not path.exists():
        raise DataError(f"data.path: treebank path {path} does not exist. {HOW_TO_GET_SAMPLE}")
    request = _request(config, path)
    if _up_to_date(output_dir, request):
        logger.info("%s is prepared and verified; nothing to do", output_dir)
        return output_dir
    check_prepared(config)
    try:
        trees = load_splits(path, on_error=config.on_error)
    except (FileNotFoundError, ValueError) as err:
        raise DataError(f"data.path: {err}") from err
    if config.max_train_trees:
        trees["train"] = trees["train"][: config.max_train_trees]
    splits = {}
    for split, treebank_split in CORPUS_SPLITS.items():
        if not trees[treebank_split]:
            raise DataError(f"data.path: {path} holds no trees for the {treebank_split} split")
        splits[split] = [(source(tree), linearize(tree)) for tree in trees[treebank_split]]
    write_corpus(output_dir, SOURCE_LANG, TARGET_LANG, splits, source=f"treebank-{config.kind}",
                 provenance={"treebank": {"request": request, "splits": CORPUS_SPLITS}})
    return output_dir


def _up_to_date(output_dir: Path, request: dict[str, Any]) -> bool:
    stage = prepared_provenance(output_dir, "treebank")
    return stage is not None and stage.get("request") == request
