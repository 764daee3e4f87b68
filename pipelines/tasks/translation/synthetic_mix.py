"""Real and synthetic pairs in one training corpus: the student's data, with its settings.

The student trains on a prepared corpus like any other (:mod:`pipelines.corpus`): ``train`` holds the real
pairs ``real_upsample`` times and the synthetic pairs (:mod:`pipelines.tasks.translation.synthesis`) once,
shuffled together by a seeded generator; ``validation``, ``test`` and ``test_unseen`` are the real corpus'
own, so the student is chosen and scored on what the teacher was. Two settings shape what the synthetic pairs teach:

- ``tag``: a token put before every synthetic source (tagged back-translation, Caswell et al., WMT 2019),
  so the model tells the teacher's output from real text; the test sources carry none. Empty: no tag.
- ``noise`` on the synthetic sources (noisy self-training, He et al., ICLR 2020, section 4: the student's
  input noise is what makes pseudo-targets pay): each word dropped with probability ``word_drop``,
  replaced by a blank with ``word_blank``, and the words shuffled within ``shuffle_window`` positions
  (Lample et al., 2018; Edunov et al., 2018). The noise is drawn once, when the corpus is written.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
from pathlib import Path

from pipelines.config import SettingError
from pipelines.corpus import EXTRA_SPLITS, SPLITS, Corpus, prepared_provenance, write_corpus
from pipelines.tasks.translation.synthesis import read_synthetic, synthesis_digest

logger = logging.getLogger(__name__)

#: What a blanked word becomes (a piece the vocabulary spells out; no id of its own needed).
BLANK = "_"


@dataclasses.dataclass
class NoiseConfig:
    """Noise on the synthetic sources (all zero: none)."""

    word_drop: float = 0.0
    word_blank: float = 0.0
    shuffle_window: int = 0

    def __post_init__(self) -> None:
        for name in ("word_drop", "word_blank"):
            if not 0 <= getattr(self, name) < 1:
                raise SettingError(self, name, "must be a probability in [0, 1)")
        if isinstance(self.shuffle_window, bool) or not isinstance(self.shuffle_window, int) or self.shuffle_window < 0:
            raise SettingError(self, "shuffle_window", "must be 0 (none) or a positive integer")


@dataclasses.dataclass
class MixConfig:
    """Settings of the real + synthetic training corpus (the pipeline config's ``mix`` section)."""

    #: The real corpus (a prepared corpus directory).
    corpus: str | None = None
    #: The synthesis' output directory (:func:`pipelines.tasks.translation.synthesis.run_synthesis`).
    synthetic_dir: str | None = None
    #: Where the mixed corpus goes.
    output_dir: str = "runs/mixed"
    #: The token before every synthetic source; empty: untagged.
    tag: str = "<synthetic>"
    #: How many times each real pair is in ``train``.
    real_upsample: int = 1
    noise: NoiseConfig = dataclasses.field(default_factory=NoiseConfig)
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.noise, dict):
            self.noise = NoiseConfig(**self.noise)
        for name in ("corpus", "synthetic_dir"):
            if not getattr(self, name):
                raise SettingError(self, name, "name the directory")
        if isinstance(self.real_upsample, bool) or not isinstance(self.real_upsample, int) or self.real_upsample < 1:
            raise SettingError(self, "real_upsample", "must be a positive integer")
        if any(c.isspace() for c in self.tag):
            raise SettingError(self, "tag", "must be one token, without spaces")


def noised(source: str, noise: NoiseConfig, rng: random.Random) -> str:
    """``source`` with words dropped, blanked and locally shuffled as ``noise`` says."""
    words = []
    for word in source.split():
        draw = rng.random()
        if draw < noise.word_drop:
            continue
        words.append(BLANK if draw < noise.word_drop + noise.word_blank else word)
    if noise.shuffle_window:
        keys = [i + rng.uniform(0, noise.shuffle_window + 1) for i in range(len(words))]
        words = [w for _, w in sorted(zip(keys, words), key=lambda pair: pair[0])]
    return " ".join(words) or source


def mix(config: MixConfig) -> Corpus:
    """Writes the student's corpus (see the module's docstring) and returns it loaded; one written from the same
    real corpus, synthetic pairs and settings is kept as it is."""
    real = Corpus.load(config.corpus)
    made_of = json.loads(json.dumps({"real_fingerprint": real.fingerprint(), "mix": dataclasses.asdict(config),
                                     "synthetic_digest": synthesis_digest(config.synthetic_dir)}))
    if prepared_provenance(config.output_dir, "made_of") == made_of:
        logger.info("the student's corpus at %s is up to date", config.output_dir)
        return Corpus.load(config.output_dir)
    synthetic = read_synthetic(config.synthetic_dir)
    rng = random.Random(config.seed)
    train = [pair for pair in real.pairs("train") for _ in range(config.real_upsample)]
    prefix = f"{config.tag} " if config.tag else ""
    train += [(prefix + noised(s, config.noise, rng), t) for s, t in synthetic]
    rng.shuffle(train)
    splits = {"train": train, **{s: list(real.pairs(s)) for s in (*SPLITS, *EXTRA_SPLITS)
                                 if s != "train" and s in real.splits}}
    provenance = {"real": str(Path(config.corpus).resolve()), "synthetic": str(Path(config.synthetic_dir).resolve()),
                  "synthetic_pairs": len(synthetic), "made_of": made_of}
    return write_corpus(config.output_dir, real.source_lang, real.target_lang, splits, source="mixed",
                        provenance=provenance)
