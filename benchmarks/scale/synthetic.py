"""A synthetic parallel corpus of any size from the bundled En-De pairs, as a ``folder`` source reads it.

Pair ``i`` of ``n`` joins two bundled training pairs, ``a`` and ``b`` (source ``a.en b.en``,
target ``a.de b.de``), with ``(a, b)`` distinct for every ``i`` (``i`` taken apart as
``r = i mod M``, ``q = i div M`` over the ``M`` bundled pairs: ``a = P[r]``, ``b = Q[(q + r) mod M]``
with ``P`` and ``Q`` seeded permutations), so lines are unique while ``n < M**2``, and as long as
real paragraph pairs of two descriptions. Only ``news.train.{en,de}`` are written: the folder
source carves validation and test out of train by a hash of the source sentence, as it does for
a user's files.
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

from pipelines.progress import counted

logger = logging.getLogger(__name__)

NAME = "news"


def bundled_pairs() -> list[tuple[str, str]]:
    """The shipped En-De corpus's training pairs (read as the ``ddtp`` source reads them)."""
    from pipelines.tasks.translation import ddtp

    return list(ddtp.shipped_corpus("en-de").pairs("train"))


def write_folder(folder: Path, n: int, seed: int = 0) -> Path:
    """``folder/news.train.{en,de}`` of ``n`` joined pairs (module docstring), written to
    temporaries renamed into place, so an interrupted write is written again; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{NAME}.train.{lang}" for lang in ("en", "de")]
    if all(path.is_file() for path in paths):
        return folder
    pairs = bundled_pairs()
    m = len(pairs)
    if n >= m * m:
        raise ValueError(f"{n} pairs: at most {m * m - 1} distinct joined pairs from {m} bundled ones")
    rng = random.Random(seed)
    first, second = list(range(m)), list(range(m))
    rng.shuffle(first)
    rng.shuffle(second)
    temporaries = [path.with_name(f".{path.name}.tmp") for path in paths]
    with open(temporaries[0], "w", encoding="utf-8") as en, open(temporaries[1], "w", encoding="utf-8") as de:
        for i in counted(range(n), f"synthetic corpus of {n:,} pairs", n):
            q, r = divmod(i, m)
            a, b = pairs[first[r]], pairs[second[(q + r) % m]]
            en.write(f"{a[0]} {b[0]}\n")
            de.write(f"{a[1]} {b[1]}\n")
    for tmp, path in zip(temporaries, paths):
        os.replace(tmp, path)
    return folder
