"""Penn Treebank reader and the data splits of the parsing task (paper section 6.3).

Reads bracketed ``.mrg`` files as the Penn Treebank ships them (Marcus et al., 1993): multi-line
trees opened by an unlabelled bracket ``( (S ...) )``, function tags and co-indices, traces and
other empty elements. Trees are normalised by `tree.parse_tree` (root ``TOP``, ``-NONE-`` and the
constituents it leaves empty removed, function tags stripped), the preprocessing of Vinyals et al.
(2015), "Grammar as a Foreign Language", whose WSJ setting the paper's section 6.3 follows.

Three sources are recognised by `load_splits`:

* the NLTK sample ``treebank.zip`` (``treebank/combined/wsj_0001.mrg`` .. ``wsj_0199.mrg``, 3,914
  trees), split by file: wsj_0001-0159 train, wsj_0160-0179 dev, wsj_0180-0199 test;
* the same sample unpacked (``nltk_data/corpora/treebank``, the folder holding ``combined/``);
* the LDC Wall Street Journal treebank (the folder holding ``00/`` .. ``24/`` with ``wsj_0200.mrg``
  etc.), split as in the paper and Vinyals et al.: sections 02-21 train, 22 dev, 23 test.

Tree boundaries: a tree starts at a line whose first character is ``(`` (PTB files indent every
inner line; one-tree-per-line files qualify too), so that an unbalanced tree is reported on its own
and the trees after it are still read.
"""

from __future__ import annotations

import logging
import re
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from .tree import Leaf, Tree, TreebankError, iter_trees, parse_tree

__all__ = ["Leaf", "Tree", "TreebankError", "load_splits", "parse_tree", "read_mrg", "read_mrg_text"]

logger = logging.getLogger(__name__)

SAMPLE_SPLITS = {"train": (1, 159), "dev": (160, 179), "test": (180, 199)}
WSJ_SPLITS = {"train": tuple(range(2, 22)), "dev": (22,), "test": (23,)}
SPLIT_NAMES = ("train", "dev", "test")
HOW_TO_GET_SAMPLE = (
    "Get the NLTK sample with `python -m nltk.downloader treebank` (it lands in "
    "~/nltk_data/corpora/treebank.zip) and point the path option at that zip file or at the unpacked "
    "folder holding combined/; or point it at the LDC WSJ treebank folder holding 00/ .. 24/."
)
_WSJ_FILE = re.compile(r"wsj_(\d{2})(\d{2})\.mrg$")
OnError = Literal["raise", "skip"]


def _tree_starts(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each chunk that starts with ``(`` in column 0, and of any text before the first."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("(")]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    for begin, end in zip(starts, starts[1:] + [len(lines)]):
        yield begin + 1, "\n".join(lines[begin:end])


def read_mrg_text(text: str, source: str, on_error: OnError = "raise") -> tuple[list[Tree], list[TreebankError]]:
    """Read the trees of one file's text; see `read_mrg`."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    trees: list[Tree] = []
    errors: list[TreebankError] = []
    for line, chunk in _tree_starts(text):
        try:
            # Extending one tree at a time keeps the good trees that precede a bad one in a chunk.
            for tree in iter_trees(chunk, source=source, line=line):
                trees.append(tree)
        except TreebankError as error:
            if on_error == "raise":
                raise
            logger.warning("skipping malformed tree: %s", error)
            errors.append(error)
    return trees, errors


def read_mrg(path: str | Path, on_error: OnError = "raise") -> tuple[list[Tree], list[TreebankError]]:
    """Read one bracketed file: (good trees in file order, errors).

    ``on_error="raise"`` raises the first `TreebankError` (file and line of the bad tree);
    ``"skip"`` leaves the bad trees out, keeps every other tree and returns the errors.
    """
    path = Path(path)
    return read_mrg_text(_decode(path.read_bytes(), str(path)), str(path), on_error)


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise TreebankError(source, line, f"not UTF-8 text ({error.reason})") from None


def _file_number(name: str) -> int:
    match = _WSJ_FILE.search(name)
    if match is None:
        raise ValueError(f"not a wsj_SSNN.mrg file name: {name}")
    return int(match.group(1) + match.group(2))


def _sample_split(number: int) -> str | None:
    for split, (low, high) in SAMPLE_SPLITS.items():
        if low <= number <= high:
            return split
    return None


def _collect(files: Iterable[tuple[str, bytes | Path]], split_of, on_error: OnError) -> dict[str, list[Tree]]:
    splits: dict[str, list[Tree]] = {name: [] for name in SPLIT_NAMES}
    errors: list[TreebankError] = []
    for name, content in sorted(files, key=lambda item: _file_number(item[0])):
        split = split_of(name)
        if split is None:
            continue
        data = content if isinstance(content, bytes) else content.read_bytes()
        trees, bad = read_mrg_text(_decode(data, name), name, on_error)
        splits[split].extend(trees)
        errors.extend(bad)
    if errors:
        logger.warning("%d malformed trees skipped (first: %s)", len(errors), errors[0])
    logger.info("treebank splits: %s", ", ".join(f"{name} {len(trees):,} trees" for name, trees in splits.items()))
    return splits


def _zip_members(path: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as archive:
        names = [name for name in archive.namelist()
                 if "/combined/" in f"/{name}" and _WSJ_FILE.search(name)]
        return [(f"{path}:{name}", archive.read(name)) for name in names]


def _sample_folder(path: Path) -> Path | None:
    for candidate in (path / "combined", path / "treebank" / "combined", path):
        if candidate.is_dir() and candidate.name == "combined" and any(candidate.glob("wsj_*.mrg")):
            return candidate
    return None


def _wsj_sections(path: Path) -> dict[int, Path]:
    return {int(child.name): child for child in path.iterdir()
            if child.is_dir() and re.fullmatch(r"\d\d", child.name) and any(child.glob("wsj_*.mrg"))}


def load_splits(path: str | Path, on_error: OnError = "raise") -> dict[str, list[Tree]]:
    """``{"train": [...], "dev": [...], "test": [...]}`` from the NLTK sample or the LDC WSJ treebank.

    ``path`` is the sample's ``treebank.zip``, the unpacked sample folder (holding ``combined/``) or
    the WSJ folder holding the two-digit section folders; anything else raises FileNotFoundError
    (missing) or ValueError (unrecognised), both naming the path and saying how to get the sample.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"treebank path {path} does not exist. {HOW_TO_GET_SAMPLE}")
    if path.is_file():
        if not zipfile.is_zipfile(path):
            raise ValueError(f"treebank path {path} is a file but not a zip archive. {HOW_TO_GET_SAMPLE}")
        members = _zip_members(path)
        if not members:
            raise ValueError(f"zip archive {path} holds no combined/wsj_*.mrg files. {HOW_TO_GET_SAMPLE}")
        logger.info("reading the NLTK treebank sample from %s (%d files)", path, len(members))
        return _collect(members, lambda name: _sample_split(_file_number(name)), on_error)
    folder = _sample_folder(path)
    if folder is not None:
        files = [(str(file), file) for file in folder.glob("wsj_*.mrg")]
        logger.info("reading the NLTK treebank sample from %s (%d files)", folder, len(files))
        return _collect(files, lambda name: _sample_split(_file_number(name)), on_error)
    sections = _wsj_sections(path)
    if sections:
        section_split = {number: split for split, numbers in WSJ_SPLITS.items() for number in numbers}
        missing = sorted(set(section_split) - set(sections))
        if missing:
            logger.warning("WSJ folder %s lacks sections %s", path, [f"{n:02d}" for n in missing])
        files = [(str(file), file) for number in sections for file in sections[number].glob("wsj_*.mrg")]
        logger.info("reading the WSJ treebank from %s (%d files)", path, len(files))
        return _collect(files, lambda name: section_split.get(_file_number(name) // 100), on_error)
    raise ValueError(f"treebank path {path} is neither the NLTK sample (treebank.zip or a folder holding "
                     f"combined/wsj_*.mrg) nor the WSJ treebank (a folder holding 02/wsj_0200.mrg ...). "
                     f"{HOW_TO_GET_SAMPLE}")
