"""Reading the text files data comes in: compressed or not, errors naming the file and line."""

from __future__ import annotations

import bz2
import gzip
import lzma
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


class DataError(ValueError):
    """The input data is malformed; the message names the file (and line) or the split."""


def open_binary(path: Path) -> BinaryIO:
    """Opens ``path`` for reading bytes, decompressing ``.xz``, ``.bz2`` and ``.gz`` files."""
    suffix = path.suffix.lower()
    if suffix == ".xz" or suffix == ".lzma":
        return lzma.open(path, "rb")
    if suffix == ".bz2":
        return bz2.open(path, "rb")
    if suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_lines(path: str | Path) -> Iterator[str]:
    """Yields the lines of a UTF-8 text file (optionally compressed) without line terminators.

    Lines are split on ``\\n`` only (a trailing ``\\r`` is removed), never on the other Unicode
    line breaks, so that line numbers agree with ``wc -l`` and with the other side of a parallel
    corpus. Raises :class:`DataError` naming the file and 1-based line number of the first line
    that is not valid UTF-8.
    """
    path = Path(path)
    try:
        handle = open_binary(path)
    except FileNotFoundError as err:
        raise DataError(f"{path}: file not found") from err
    with handle as f:
        for lineno, raw in enumerate(f, start=1):
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(
                    f"{path}:{lineno}: not valid UTF-8 ({err.reason} at byte {err.start} of the "
                    f"line: {raw[max(0, err.start - 10):err.start + 10]!r})"
                ) from None


def count_lines(path: str | Path) -> int:
    """Number of lines in a (possibly compressed) file; a last line without newline counts."""
    path = Path(path)
    count = 0
    last = b"\n"
    try:
        handle = open_binary(path)
    except FileNotFoundError as err:
        raise DataError(f"{path}: file not found") from err
    with handle as f:
        while chunk := f.read(1 << 20):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")
