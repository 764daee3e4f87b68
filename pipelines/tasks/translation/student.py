"""The student's recipe: a teacher's translations of untranslated text beside the real pairs.

The translation pipeline's ``synthetic`` section. With a ``teacher``, the flow translates the ``pool``
with it (:mod:`pipelines.tasks.translation.synthesis`), writes the student's corpus of the real pairs
``real_upsample`` times and the synthetic ones (:mod:`pipelines.tasks.translation.synthetic_mix`; untagged and
without noise unless set), trains the vocabulary on that corpus, and trains on it for all but the last
``real_only_share`` of the budget, which goes to the real pairs alone
(:func:`pipelines.training.stage.train_on_corpus`). Synthetic pairs first and real ones last is the order of
He et al. (ICLR 2020); the measured hour is in ``benchmarks/results/README.md``. The evaluation scores the
real corpus' test splits, as for any run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.config import SettingError

if TYPE_CHECKING:
    from pipelines.tasks.translation.pool import PoolConfig
    from pipelines.tasks.translation.synthesis import SynthesisConfig
    from pipelines.tasks.translation.synthetic_mix import MixConfig

#: ``teacher: champion``: this run's registered model's champion; without one yet, the run trains without a teacher.
OWN_CHAMPION = "champion"
#: The token before every synthetic source (tagged back-translation).
TAG = "<synthetic>"
#: With noise, the words of a synthetic source are shuffled within this many positions (He et al.'s window).
SHUFFLE_WINDOW = 3


def registered_name_and_alias(uri: str) -> tuple[str, str] | None:
    """``models:/NAME@ALIAS`` as ``(NAME, ALIAS)``; None when it does not name a registered model by alias."""
    name, at, alias = uri.removeprefix("models:/").partition("@")
    return (name, alias) if uri.startswith("models:/") and name and at and alias else None


@dataclasses.dataclass
class SyntheticConfig:
    """The ``synthetic`` section: who teaches, from which text, and how the student mixes it in."""

    #: null: no synthetic pairs. ``champion``: the champion of this run's registered model (none yet: none);
    #: ``models:/NAME@ALIAS``: a registered model; or an export directory.
    teacher: str | None = None
    #: The untranslated text: ``ddtp`` (the bundled English pool) or a folder of text files, a sentence or
    #: paragraph a line.
    pool: str = "ddtp"
    #: A ``<synthetic>`` token before every synthetic source (tagged back-translation, Caswell et al., 2019), so
    #: the student tells the teacher's output from real text; false: untagged, which measured better here.
    tag: bool = False
    #: How many times each real pair is in the student's corpus (the synthetic ones once).
    real_upsample: int = 2
    #: Noise on the synthetic sources (He et al. use 0.1): each word dropped with this probability, else blanked
    #: with it, the words shuffled within 3 positions; 0: none, which measured better here.
    noise: float = 0.0
    #: The share of the training budget, at its end, trained on the real pairs alone.
    real_only_share: float = 0.2

    def __post_init__(self) -> None:
        if self.teacher is not None and (not isinstance(self.teacher, str) or not self.teacher.strip()):
            raise SettingError(self, "teacher", "name the teacher: champion, models:/NAME@ALIAS or an export "
                               "directory (null: none)")
        if not isinstance(self.pool, str) or not self.pool:
            raise SettingError(self, "pool", "ddtp or a folder of text files")
        if isinstance(self.real_upsample, bool) or not isinstance(self.real_upsample, int) or self.real_upsample < 1:
            raise SettingError(self, "real_upsample", "must be a positive integer")
        if isinstance(self.real_only_share, bool) or not 0 <= self.real_only_share < 1:
            raise SettingError(self, "real_only_share", "must be a fraction in [0, 1)")
        if isinstance(self.noise, bool) or not isinstance(self.noise, (int, float)) or not 0 <= self.noise < 0.5:
            raise SettingError(self, "noise", "must be a probability in [0, 0.5)")

    def pool_config(self) -> PoolConfig:
        """The ``synthesize`` stage's pool: the bundled one by name, else the folder."""
        from pipelines.tasks.translation.pool import PoolConfig

        return PoolConfig(source="ddtp") if self.pool == "ddtp" else PoolConfig(source="folder", folder=self.pool)

    def synthesis_config(self, teacher: str, corpus: str | Path, output_dir: str | Path,
                         tracking_uri: str | None) -> SynthesisConfig:
        """The ``synthesize`` stage's settings for ``teacher`` (resolved from :data:`OWN_CHAMPION` by the flow)."""
        from pipelines.tasks.translation.synthesis import SynthesisConfig

        return SynthesisConfig(teacher=teacher, pool=self.pool_config(), corpus=str(corpus),
                               output_dir=str(output_dir), tracking_uri=tracking_uri)

    def mix_config(self, corpus: str | Path, synthetic_dir: str | Path, output_dir: str | Path) -> MixConfig:
        """The student's corpus' settings: :data:`TAG` on every synthetic source (unless ``tag`` is off), this
        section's noise."""
        from pipelines.tasks.translation.synthetic_mix import MixConfig, NoiseConfig

        noise = NoiseConfig(word_drop=self.noise, word_blank=self.noise,
                            shuffle_window=SHUFFLE_WINDOW if self.noise else 0)
        return MixConfig(corpus=str(corpus), synthetic_dir=str(synthetic_dir), output_dir=str(output_dir),
                         tag=TAG if self.tag else "",
                         real_upsample=self.real_upsample, noise=noise)
