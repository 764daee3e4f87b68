"""The package-held-out test split of the DDTP corpora (``test_unseen``): whole packages nobody trained on.

The sentence-hash split of :mod:`pipelines.tasks.translation.ddtp` keeps every English sentence in
one split, but sibling packages describe themselves almost identically ("This package contains
the development files for libfoo" beside "... the shared library of libfoo"), so most test
sentences have a near-twin in training and BLEU on them overstates what a model does on a
package it has never seen (issue 20: the keras-hub baseline lost ~3 BLEU on a newer release's
descriptions). Held-out-group test sets are the usual answer to such leakage (e.g. Søgaard et
al., 2021, "We Need to Talk About Random Splits", EACL).

How the split is made, from the ``Package`` names of the Translation files:

1. **Package group**: each binary package name is reduced to a stem (:func:`package_stem`), so that
   ``libfoo1``, ``libfoo-dev``, ``libfoo-doc``, ``foo``, ``foo-data`` and ``python3-foo`` go together.
   A sentence belongs to the groups of every package whose description contains it.
2. **Shared sentences**: a sentence used by at least ``max_groups`` groups is Debian boilerplate
   ("This package contains the documentation.") rather than any package's own text; it keeps its
   sentence-hash split and links nothing. A sentence of several (but fewer) groups joins them into
   one unit (union-find), so that two groups sharing their own text are held out together.
3. **Units held out**: a unit is held out when a salted sha256 of its smallest stem falls below
   ``fraction``. Its sentences that the sentence hash put in ``train`` form ``test_unseen``;
   those the hash put in ``validation`` or ``test`` stay there, so both of those files are
   unchanged and reproducible, and ``train`` loses exactly the ``test_unseen`` sentences.

So no sentence of a held-out package (boilerplate aside) is in ``train``, and ``test_unseen`` shares
no English sentence with any other split. ``<split>.packages`` files beside the text record, per
line, the groups of its English sentence (``*`` for boilerplate), which is what the tests check.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable

from pipelines.tasks.translation.cleaning import normalize_text
from pipelines.tasks.translation.ddtp_files import Description

#: Name of the package-held-out split; a corpus that has it is scored on it beside ``test``.
UNSEEN_SPLIT = "test_unseen"
#: Salt of the unit hash; versioned like the sentence split's salt.
PACKAGE_SALT = "ddtp-package-split-v1"
#: What ``<split>.packages`` writes for a boilerplate sentence (one of ``max_groups`` or more groups).
SHARED_MARK = "*"

#: Name parts that say which ecosystem or packaging a package belongs to, not what it is.
_ECOSYSTEM_PARTS = frozenset({
    "python", "python3", "pypy", "golang", "github", "gitlab", "node", "ruby", "r", "cran",
    "bioc", "php", "elpa", "fonts", "texlive", "ghc", "haskell", "perl", "lua", "ocaml", "gir1.2",
    "rust", "librust", "erlang", "tcl", "libghc", "octave", "coq", "gnome", "kde", "qml",
    "qml-module", "xfonts", "ttf", "otf", "vim", "emacs", "jupyter", "sphinx", "hunspell",
    "aspell", "myspell", "hyphen", "mythes", "libjs", "libjs-jquery", "jquery",
})
_LIB_PREFIX = re.compile(r"^lib(?:32|64|x32|n32)?(?=.)")
_CROSS_SUFFIX = re.compile(r"-[a-z0-9]+(?:el)?(?:r6)?-cross$")
#: A trailing soname or version: digits and dots with an optional letter ("0d", "5.3", "21a").
_VERSION_TAIL = re.compile(r"[0-9][0-9.+~]*[a-z]?$")


def package_stem(name: str) -> str:
    """The group a binary package belongs to: its name without ``lib``, ecosystem parts, suffixes
    and version.

    ``libfoo1`` / ``libfoo-dev`` / ``foo-data`` / ``python3-foo`` -> ``foo``; ``liblua5.3-0-dbg`` ->
    ``lua``; ``gir1.2-gtk-3.0`` -> ``gtk``; ``libatomic1-armel-cross`` -> ``atomic``. Deliberately
    coarse: splitting too little only makes the unseen split easier, never leaky, whereas a
    family split across both sides is exactly the leak this split exists to remove.
    """
    name = _CROSS_SUFFIX.sub("", name.strip().lower())
    candidates = []
    for i, part in enumerate(p for p in name.split("-") if p):
        part = _LIB_PREFIX.sub("", part) if i == 0 else part
        stem = _VERSION_TAIL.sub("", part)
        if stem:  # "0", "3.0": versions, not names
            # An ecosystem word is a prefix ("lua-socket") unless it carries a version ("lua5.3").
            candidates.append((stem, part in _ECOSYSTEM_PARTS))
    for stem, is_prefix in candidates:
        if not is_prefix:
            return stem
    return candidates[0][0] if candidates else name


def sentence_groups(english: dict[str, Description],
                    other: dict[str, Description]) -> dict[str, frozenset[str]]:
    """Normalised English sentence -> the package groups whose (translated) description holds it.

    Only descriptions :func:`~pipelines.tasks.translation.ddtp_files.align_descriptions` pairs count
    (in both languages, same paragraph count): the others put no sentence in the corpus.
    """
    groups: dict[str, set[str]] = {}
    for md5, description in english.items():
        translated = other.get(md5)
        if translated is None or len(translated.paragraphs) != len(description.paragraphs):
            continue
        stems = {package_stem(p) for p in description.packages} or {f"md5:{md5}"}
        for text in (description.summary, *description.paragraphs):
            groups.setdefault(normalize_text(text), set()).update(stems)
    return {sentence: frozenset(stems) for sentence, stems in groups.items()}


def _unit_hash(unit: str) -> float:
    digest = hashlib.sha256(f"{PACKAGE_SALT}|{unit}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclasses.dataclass
class PackageSplit:
    """Which package groups are held out, and how the units were formed (for the manifest)."""

    groups: dict[str, frozenset[str]]
    held_out: frozenset[str]
    max_groups: int
    stats: dict[str, int]

    def is_shared(self, english: str) -> bool:
        """Boilerplate: used by ``max_groups`` or more package groups."""
        return len(self.groups.get(english, ())) >= self.max_groups

    def is_held_out(self, english: str) -> bool:
        """Whether the (normalised) English sentence is a held-out package's own text."""
        stems = self.groups.get(english, frozenset())
        return bool(stems) and not self.is_shared(english) and bool(stems & self.held_out)

    def label(self, english: str) -> str:
        """The ``<split>.packages`` line of a sentence: its groups, sorted, or ``*``."""
        if self.is_shared(english):
            return SHARED_MARK
        return " ".join(sorted(self.groups.get(english, ())))


def package_split(groups: dict[str, frozenset[str]], fraction: float, max_groups: int,
                  sentences: Iterable[str] | None = None) -> PackageSplit:
    """Units of package groups (union-find over sentences of 2 .. ``max_groups`` - 1 groups) and
    those held out by the unit hash. ``sentences`` limits the linking to the corpus' sentences
    (those that survived cleaning); by default every sentence of ``groups`` links."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    if max_groups < 2:
        raise ValueError(f"max_groups must be >= 2, got {max_groups}")
    parent: dict[str, str] = {}

    def find(stem: str) -> str:
        root = parent.setdefault(stem, stem)
        while root != parent[root]:
            root = parent[root]
        while parent[stem] != root:
            parent[stem], stem = root, parent[stem]
        return root

    kept = groups if sentences is None else {s: groups[s] for s in sentences if s in groups}
    shared = 0
    for stems in kept.values():
        if len(stems) >= max_groups:
            shared += 1
            continue
        first, *rest = sorted(stems)
        for stem in rest:
            a, b = find(first), find(stem)
            if a != b:
                parent[max(a, b)] = min(a, b)  # the root is the unit's smallest stem
        find(first)
    units: dict[str, set[str]] = {}
    for stem in list(parent):
        units.setdefault(find(stem), set()).add(stem)
    held_out = frozenset(stem for root, members in units.items() if _unit_hash(root) < fraction
                         for stem in members)
    stats = {"package_groups": len(parent), "units": len(units),
             "largest_unit": max((len(m) for m in units.values()), default=0),
             "held_out_groups": len(held_out),
             "held_out_units": sum(1 for root in units if _unit_hash(root) < fraction),
             "shared_sentences": shared}
    return PackageSplit(kept, held_out, max_groups, stats)
