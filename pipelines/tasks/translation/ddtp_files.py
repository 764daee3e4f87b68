"""Debian's ``Translation-<lang>`` index files: finding, fetching, parsing and aligning them.

RFC-822 style records of the Debian Description Translation Project (DDTP)::

    Package: 0ad
    Description-md5: d943033bedada21853d2ae54a2578a7b
    Description-de: <one-line summary>
     <long description, wrapped lines starting with a space>
     .
     <next paragraph>

The same ``Description-md5`` in two languages means the same English original, which is how
:func:`align_descriptions` pairs a translation with its English text. The corpus builder
(:mod:`pipelines.tasks.translation.ddtp`) uses these readers.
"""

from __future__ import annotations

import dataclasses
import logging
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from pipelines.corpus import require_network
from pipelines.textfiles import DataError, read_lines

logger = logging.getLogger(__name__)

COMPRESSED_SUFFIXES = (".xz", ".bz2", ".gz", "")


@dataclasses.dataclass(frozen=True)
class Description:
    """One translated package description: its summary line and long-description paragraphs.

    ``packages`` are the binary packages whose record carries this description (in file order);
    they decide the package-held-out test split (:mod:`pipelines.tasks.translation.ddtp_packages`)
    and take no part in equality: two descriptions are the same text whoever uses them.
    """

    summary: str
    paragraphs: tuple[str, ...]
    packages: tuple[str, ...] = dataclasses.field(default=(), compare=False)


def _description_text(summary: str, body: list[str]) -> Description:
    """Splits the long description into paragraphs at ``" ."`` lines (Debian policy 5.6.13).

    Wrapped lines are joined with a space; verbatim lines (two leading spaces) are joined the same
    way because the cleaning step collapses whitespace anyway.
    """
    paragraphs: list[str] = []
    current: list[str] = []
    for line in body:
        if line.strip() == ".":
            paragraphs.append(" ".join(current))
            current = []
        else:
            current.append(line.strip())
    paragraphs.append(" ".join(current))
    return Description(summary.strip(), tuple(p for p in paragraphs if p.strip()) if body else ())


def parse_translation_file(path: str | Path) -> dict[str, Description]:
    """Parses a ``Translation-<lang>`` file into ``{Description-md5: Description}``.

    Several packages may share one description (same md5); the first record's text wins and
    every record's ``Package`` is kept in :attr:`Description.packages`. Raises
    :class:`DataError` naming the file and line for malformed records and invalid UTF-8.
    """
    path = Path(path)
    descriptions: dict[str, Description] = {}
    packages: dict[str, list[str]] = {}
    md5 = summary = package = None
    body: list[str] = []
    start = 0

    def flush() -> None:
        if summary is None:
            return
        if md5 is None:
            raise DataError(f"{path}:{start}: record has a description but no Description-md5")
        descriptions.setdefault(md5, _description_text(summary, body))
        if package:
            packages.setdefault(md5, []).append(package)

    in_description = False
    for lineno, line in enumerate(tqdm(read_lines(path), desc=path.name, unit=" lines",
                                       mininterval=2.0, leave=False, disable=None), start=1):
        if not line.strip():
            flush()
            md5 = summary = package = None
            body = []
            in_description = False
            continue
        if line[0] in " \t":
            if not in_description:
                continue  # a continuation of some other multi-line field
            body.append(line[1:])
            continue
        if md5 is None and summary is None:
            start = lineno
        key, sep, value = line.partition(":")
        if not sep:
            raise DataError(f"{path}:{lineno}: expected 'Field: value', got {line[:60]!r}")
        in_description = key.startswith("Description-") and key != "Description-md5"
        if key == "Description-md5":
            md5 = value.strip()
        elif key == "Package":
            package = value.strip()
        elif in_description:
            summary = value
    flush()
    if not descriptions:
        raise DataError(f"{path}: no Description records found; is this a Translation-<lang> file?")
    for md5, names in packages.items():
        descriptions[md5] = dataclasses.replace(descriptions[md5], packages=tuple(names))
    logger.info("%s: %d distinct descriptions", path, len(descriptions))
    return descriptions


def align_descriptions(
    english: dict[str, Description], other: dict[str, Description]
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Pairs the English descriptions with their translations (English file order).

    Returns the ``(english, other)`` pairs and counts: descriptions in both languages, and those
    skipped entirely because their paragraph counts differ (the paragraphs cannot be aligned,
    and a translator who restructured the text may also have rephrased the summary).
    """
    pairs: list[tuple[str, str]] = []
    stats = {"descriptions_in_both": 0, "paragraph_count_mismatch": 0}
    for md5, en in english.items():
        xx = other.get(md5)
        if xx is None:
            continue
        stats["descriptions_in_both"] += 1
        if len(en.paragraphs) != len(xx.paragraphs):
            stats["paragraph_count_mismatch"] += 1
            continue
        pairs.append((en.summary, xx.summary))
        pairs.extend(zip(en.paragraphs, xx.paragraphs))
    return pairs, stats


def find_translation_file(directory: str | Path, lang: str) -> Path:
    """``directory/Translation-<lang>``, with suffix ``.xz``, ``.bz2``, ``.gz`` or none."""
    directory = Path(directory)
    for suffix in COMPRESSED_SUFFIXES:
        path = directory / f"Translation-{lang}{suffix}"
        if path.is_file():
            return path
    raise DataError(f"{directory}: no Translation-{lang}[.xz|.bz2|.gz] file")


def fetch_translation_files(
    mirror: str, suite: str, langs: Sequence[str], cache_dir: str | Path, *, timeout: float = 10.0
) -> dict[str, Path]:
    """Downloads ``dists/<suite>/main/i18n/Translation-<lang>.{xz,bz2}`` from a Debian mirror.

    Checks that the mirror is reachable first (short timeout) so that an offline machine fails
    at once with a clear message. Files already in ``cache_dir`` are reused.
    """
    from keras_transformer.files import atomic_write_bytes

    base = f"{mirror.rstrip('/')}/dists/{suite}/main/i18n"
    require_network([base], timeout=timeout, what="fetch Debian Translation files")
    cache_dir = Path(cache_dir)
    paths: dict[str, Path] = {}
    for lang in langs:
        for suffix in (".xz", ".bz2"):
            path = cache_dir / suite / f"Translation-{lang}{suffix}"
            if path.is_file():
                paths[lang] = path
                break
            url = f"{base}/Translation-{lang}{suffix}"
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    data = response.read()
            except urllib.error.HTTPError as err:
                if err.code == 404:
                    continue
                raise ConnectionError(f"cannot fetch {url}: HTTP {err.code}") from err
            except (urllib.error.URLError, OSError) as err:
                raise ConnectionError(f"cannot fetch {url}: {err}") from err
            atomic_write_bytes(path, data)
            logger.info("fetched %s (%d bytes)", url, len(data))
            paths[lang] = path
            break
        else:
            raise DataError(f"{base}: no Translation-{lang}.xz or .bz2 (suite {suite!r})")
    return paths
