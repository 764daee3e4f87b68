"""On-disk layout of a prepared parallel corpus, with checksummed manifest and atomic writes.

A prepared corpus is a directory::

    train.<src>  train.<tgt>  validation.<src>  validation.<tgt>  test.<src>  test.<tgt>
    manifest.json

Each text file is UTF-8, one sentence per line, line ``i`` of ``<split>.<src>`` translating line
``i`` of ``<split>.<tgt>``. A corpus may hold further splits of :data:`EXTRA_SPLITS` (the bundled
DDTP corpora's ``test_unseen``) and per-line side files such as ``<split>.packages`` (what line
``i`` came from), listed and checksummed like the text. Files may also be stored xz-compressed
(``train.en.xz``), which is how the bundled DDTP corpora ship. ``manifest.json`` records the
source name, the language pair, the number of pairs per split, the sha256 of every file (and of
its decompressed text), the cleaning counts per reason and the provenance.

Writes are atomic: every file goes to a temporary name in the same directory and is renamed into
place with ``os.replace``; the old manifest is deleted before the first write and the new one is
written last. A killed write therefore leaves either no manifest (a rerun redoes the work) or a
manifest whose checksums do not match the files (``Corpus.load`` refuses it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import lzma
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from keras_transformer.files import atomic_write_bytes
from pipelines.textfiles import DataError, read_lines

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
SPLITS = ("train", "validation", "test")
#: Optional splits a corpus may have beside :data:`SPLITS`. ``test_unseen``: a second test split of
#: whole groups (packages) that have no sentence in ``train``; see
#: :mod:`pipelines.tasks.translation.ddtp_packages`.
EXTRA_SPLITS = ("test_unseen",)
FORMAT_VERSION = 1
#: xz settings of shipped files; fixed so that a rebuild with the same liblzma is byte-identical.
XZ_PRESET = 9


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def remove_stale_temporaries(directory: Path) -> None:
    """Deletes temporary files left in ``directory`` by a killed :func:`atomic_write_bytes`."""
    for tmp in directory.glob(".*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def lines_to_bytes(lines: Iterable[str]) -> bytes:
    """One line per string, each terminated by ``\\n``; refuses strings that contain a newline."""
    out = []
    for i, line in enumerate(lines):
        if "\n" in line or "\r" in line:
            raise DataError(f"line {i + 1} contains a line break and would break the alignment")
        out.append(line)
    return ("\n".join(out) + "\n").encode("utf-8") if out else b""


def compress_xz(data: bytes) -> bytes:
    return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=XZ_PRESET)


class _FileWriter:
    """One file of a corpus being written: streamed to a temporary beside it, checksummed as it
    goes (text and, with ``compress``, the xz bytes), renamed into place by :meth:`finish` only.

    Its bytes are :func:`lines_to_bytes` of the lines (:func:`compress_xz` of them with
    ``compress``: liblzma's output does not depend on how its input is fed), without the corpus
    ever being in memory.
    """

    BUFFER_LINES = 8192

    def __init__(self, directory: Path, name: str, compress: bool):
        self.path = directory / (f"{name}.xz" if compress else name)
        fd, self.tmp = tempfile.mkstemp(dir=directory, prefix=f".{self.path.name}.", suffix=".tmp")
        self.file = os.fdopen(fd, "wb")
        self.compressor = (lzma.LZMACompressor(format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=XZ_PRESET)
                           if compress else None)
        self.text_digest, self.digest = hashlib.sha256(), hashlib.sha256()
        self.lines, self.bytes = 0, 0
        self.buffer: list[str] = []

    def write(self, line: str) -> None:
        if "\n" in line or "\r" in line:
            raise DataError(f"{self.path.name}: line {self.lines + len(self.buffer) + 1} contains a line break "
                            "and would break the alignment")
        self.buffer.append(line)
        if len(self.buffer) >= self.BUFFER_LINES:
            self._flush()

    def _flush(self) -> None:
        if not self.buffer:
            return
        text = ("\n".join(self.buffer) + "\n").encode("utf-8")
        self.lines += len(self.buffer)
        self.buffer = []
        self.text_digest.update(text)
        self._emit(self.compressor.compress(text) if self.compressor else text)

    def _emit(self, data: bytes) -> None:
        self.digest.update(data)
        self.bytes += len(data)
        self.file.write(data)

    def finish(self) -> dict[str, Any]:
        """Flushes, fsyncs and renames the file into place; returns its manifest entry."""
        self._flush()
        if self.compressor:
            self._emit(self.compressor.flush())
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.chmod(self.tmp, 0o666 & ~_umask())  # mkstemp's 0600, made what a plain open() gives
        os.replace(self.tmp, self.path)
        return {"lines": self.lines, "text_sha256": self.text_digest.hexdigest(),
                "sha256": self.digest.hexdigest(), "bytes": self.bytes}

    def abort(self) -> None:
        self.file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_corpus(
    directory: str | Path,
    source_lang: str,
    target_lang: str,
    splits: Mapping[str, Iterable[tuple[str, str]]],
    *,
    source: str,
    cleaning: dict[str, Any] | None = None,
    provenance: dict[str, Any] | None = None,
    compress: bool = False,
    side_files: Mapping[str, Iterable[str]] | None = None,
) -> Corpus:
    """Writes a corpus in the layout above (atomically, manifest last) and returns it loaded.

    ``splits`` maps each of :data:`SPLITS` (and optionally of :data:`EXTRA_SPLITS`) to its
    ``(source, target)`` pairs, any iterable: each split is read once, in that order, and streamed
    to its two files, so memory does not grow with the corpus. An iterable that raises leaves the
    directory without a manifest (the files of the split being written are removed). ``cleaning``
    is read when the manifest is written, after the last split. ``side_files`` maps further file
    names (``train.packages``) to their lines; they are written and checksummed the same way.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    missing = [s for s in SPLITS if s not in splits]
    if missing:
        raise DataError(f"cannot write corpus to {directory}: missing split(s) {missing}")
    unknown = [s for s in splits if s not in SPLITS + EXTRA_SPLITS]
    if unknown:
        raise DataError(f"cannot write corpus to {directory}: unknown split(s) {unknown}; "
                        f"splits are {SPLITS} and optionally {EXTRA_SPLITS}")
    names = [*SPLITS, *(s for s in EXTRA_SPLITS if s in splits)]
    # The old manifest goes first: from here until the new one is written, the directory is
    # not trusted by Corpus.load or by a rerun of prepare_corpus().
    with contextlib.suppress(FileNotFoundError):
        (directory / MANIFEST).unlink()
    remove_stale_temporaries(directory)
    files: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}

    def write(file_names: list[str], rows: Iterable[tuple[str, ...]]) -> int:
        writers = [_FileWriter(directory, name, compress) for name in file_names]
        try:
            n = 0
            for row in rows:
                for writer, line in zip(writers, row, strict=True):
                    writer.write(line)
                n += 1
            for writer in writers:
                files[writer.path.name] = writer.finish()
        except BaseException:
            for writer in writers:
                writer.abort()
            raise
        return n

    for split in names:
        counts[split] = write([f"{split}.{source_lang}", f"{split}.{target_lang}"], splits[split])
    for name, lines in sorted((side_files or {}).items()):
        write([name], ((line,) for line in lines))
    manifest = {
        "format_version": FORMAT_VERSION,
        "source": source,
        "language_pair": f"{source_lang}-{target_lang}",
        "source_lang": source_lang,
        "target_lang": target_lang,
        "counts": counts,
        "files": files,
        "cleaning": cleaning or {},
        "provenance": provenance or {},
    }
    atomic_write_bytes(directory / MANIFEST, manifest_bytes(manifest))
    logger.info("wrote %s corpus %s-%s to %s: %s", source, source_lang, target_lang, directory,
                ", ".join(f"{split} {count:,}" for split, count in manifest["counts"].items()))
    return Corpus(directory, manifest)


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """Canonical JSON of a manifest (sorted keys, no timestamps) so rebuilds are bit-identical."""
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


@dataclasses.dataclass
class Corpus:
    """A prepared corpus directory and its manifest (see the module docstring for the layout)."""

    directory: Path
    manifest: dict[str, Any]

    @classmethod
    def load(cls, directory: str | Path, *, verify: bool = True) -> Corpus:
        """Reads ``manifest.json`` of ``directory``; with ``verify`` checks every file's sha256.

        Raises :class:`DataError` when the manifest is missing or malformed, or a file is missing
        or does not match its checksum.
        """
        directory = Path(directory)
        manifest_path = directory / MANIFEST
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError as err:
            raise DataError(f"{manifest_path}: no manifest; the corpus was not (completely) "
                            "prepared") from err
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise DataError(f"{manifest_path}: manifest is not valid JSON: {err}") from err
        for key in ("source_lang", "target_lang", "counts", "files"):
            if key not in manifest:
                raise DataError(f"{manifest_path}: manifest has no '{key}'")
        corpus = cls(directory, manifest)
        if verify:
            corpus.verify()
        return corpus

    @property
    def source_lang(self) -> str:
        return self.manifest["source_lang"]

    @property
    def target_lang(self) -> str:
        return self.manifest["target_lang"]

    @property
    def language_pair(self) -> str:
        return f"{self.source_lang}-{self.target_lang}"

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits this corpus has: :data:`SPLITS`, then those of :data:`EXTRA_SPLITS` it holds."""
        return SPLITS + tuple(s for s in EXTRA_SPLITS if s in self.manifest["counts"])

    @property
    def counts(self) -> dict[str, int]:
        """Number of sentence pairs per split."""
        return dict(self.manifest["counts"])

    def _name(self, split: str, lang: str) -> str:
        if split not in self.splits:
            raise KeyError(f"unknown split {split!r}; {self.directory.name} has {self.splits}")
        if lang not in (self.source_lang, self.target_lang):
            raise KeyError(f"language {lang!r} is not in {self.language_pair}")
        for name in (f"{split}.{lang}", f"{split}.{lang}.xz"):
            if name in self.manifest["files"]:
                return name
        raise DataError(f"{self.directory / MANIFEST}: no file for split {split!r}, "
                        f"language {lang!r}")

    def path(self, split: str, lang: str) -> Path:
        """Path of the text file of ``split`` in language ``lang`` (may end in ``.xz``)."""
        return self.directory / self._name(split, lang)

    def file_sha256(self, split: str, lang: str) -> str:
        """The sha256 of the decompressed text of ``split``/``lang``, from the manifest."""
        return self.manifest["files"][self._name(split, lang)]["text_sha256"]

    def lines(self, split: str, lang: str) -> Iterator[str]:
        """The sentences of one side of ``split``."""
        return read_lines(self.path(split, lang))

    def side_lines(self, name: str) -> Iterator[str]:
        """The lines of a side file such as ``train.packages`` (see :func:`write_corpus`)."""
        for candidate in (name, f"{name}.xz"):
            if candidate in self.manifest["files"]:
                return read_lines(self.directory / candidate)
        raise DataError(f"{self.directory / MANIFEST}: no side file {name!r}")

    def pairs(self, split: str) -> Iterator[tuple[str, str]]:
        """Yields the ``(source, target)`` sentence pairs of ``split`` in file order."""
        return zip(self.lines(split, self.source_lang), self.lines(split, self.target_lang),
                   strict=True)

    def fingerprint(self, split: str | None = None) -> str:
        """A short hash of the corpus text (of one split, or all), e.g. to key caches."""
        splits = self.splits if split is None else (split,)
        parts = [self.language_pair]
        for s in splits:
            parts += [self.file_sha256(s, self.source_lang), self.file_sha256(s, self.target_lang)]
        return sha256_bytes("|".join(parts).encode())[:16]

    def verify(self) -> None:
        """Checks that every file listed in the manifest exists and matches its sha256."""
        for name, entry in sorted(self.manifest["files"].items()):
            path = self.directory / name
            if not path.is_file():
                raise DataError(f"{path}: listed in {MANIFEST} but missing")
            actual = sha256_file(path)
            if actual != entry["sha256"]:
                raise DataError(
                    f"{path}: sha256 {actual} does not match {MANIFEST} ({entry['sha256']}); "
                    "the file is incomplete or was modified"
                )
        for split in self.splits:
            for lang in (self.source_lang, self.target_lang):
                self._name(split, lang)


def prepared_provenance(directory: str | Path, key: str) -> dict[str, Any] | None:
    """``provenance[key]`` of the prepared corpus in ``directory``: what a data stage recorded of
    how it made it. None when there is no corpus there or it does not verify (a stage then
    prepares it again)."""
    if not (Path(directory) / MANIFEST).is_file():
        return None
    try:
        corpus = Corpus.load(directory)
    except DataError as err:
        logger.warning("existing corpus in %s is not trusted (%s); preparing it again", directory, err)
        return None
    return corpus.manifest.get("provenance", {}).get(key, {})


class OfflineError(ConnectionError):
    """A server the stage needs does not answer at all: retrying soon will not help."""


def require_network(urls: Iterable[str], *, timeout: float = 10.0, what: str = "download",
                    hint: str = "Offline, use the bundled 'ddtp' source or a 'folder' of your own "
                                "parallel files instead") -> None:
    """Fails fast, with a clear message, if the servers of ``urls`` do not answer.

    Sends one HTTP ``HEAD`` request per distinct host with a short timeout before a long
    download starts, so that an offline machine (or a server that accepts connections but never
    answers) gets an error within ``timeout`` seconds instead of a download library retrying for
    minutes. Any HTTP status counts as reachable: only the network is being checked.
    """
    first_url_per_host: dict[str, str] = {}
    for url in urls:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme in ("http", "https") and parsed.netloc:
            first_url_per_host.setdefault(parsed.netloc, url)
    for host, url in sorted(first_url_per_host.items()):
        try:
            request = urllib.request.Request(url, method="HEAD")
            with urllib.request.urlopen(request, timeout=timeout):
                pass
        except urllib.error.HTTPError:
            pass  # the server answered; whether HEAD is allowed does not matter here
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise OfflineError(
                f"cannot {what}: {host} is unreachable ({reason}; tried {url} with a "
                f"{timeout:g}s timeout). This step needs internet access. {hint}"
            ) from err
