"""The student's corpus: real pairs up-sampled, synthetic ones tagged and noised, read by the input pipeline."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from pipelines.config import ConfigError, from_dict
from pipelines.corpus import write_corpus
from pipelines.input_pipeline import InputConfig, make_dataset
from pipelines.tasks.translation.synthesis import MANIFEST
from pipelines.tasks.translation.synthetic_mix import BLANK, MixConfig, NoiseConfig, mix, noised

REAL = [("The package provides a library.", "Das Paket stellt eine Bibliothek bereit."),
        ("Fonts for the desktop.", "Schriften für den Desktop.")]
SYNTHETIC = [("Shows the current weather.", "Zeigt das aktuelle Wetter."),
             ("Plugins for the editor.", "Erweiterungen für den Editor."),
             ("Data files for the game.", "Datendateien für das Spiel.")]


def _synthesis(folder, digest="d1"):
    """What :func:`pipelines.tasks.translation.synthesis.run_synthesis` leaves behind, written by hand."""
    folder.mkdir(exist_ok=True)
    for lang, side in (("en", [s for s, _ in SYNTHETIC]), ("de", [t for _, t in SYNTHETIC])):
        (folder / f"synthetic.{lang}").write_text("".join(f"{line}\n" for line in side), "utf-8")
    (folder / MANIFEST).write_text(json.dumps({"source_file": str(folder / "synthetic.en"),
                                               "target_file": str(folder / "synthetic.de"), "digest": digest}),
                                   "utf-8")
    return str(folder)


def test_real_pairs_are_up_sampled_synthetic_ones_tagged_and_the_input_pipeline_reads_both(tmp_path, tokenizer):
    real = write_corpus(tmp_path / "real", "en", "de", {"train": REAL, "validation": REAL[:1], "test": REAL[1:],
                                                        "test_unseen": REAL[:1]}, source="t")
    config = from_dict(MixConfig, {"corpus": str(real.directory), "synthetic_dir": _synthesis(tmp_path / "syn"),
                                   "output_dir": str(tmp_path / "mixed"), "real_upsample": 3, "tag": "<bt>"})
    mixed = mix(config)
    train = Counter(mixed.pairs("train"))
    assert train == Counter({**{pair: 3 for pair in REAL}, **{(f"<bt> {s}", t): 1 for s, t in SYNTHETIC}})
    # The real corpus' evaluation splits, untagged: the student is scored as the teacher was.
    assert list(mixed.pairs("test")) == REAL[1:] and list(mixed.pairs("test_unseen")) == REAL[:1]
    assert mixed.manifest["provenance"]["synthetic_pairs"] == len(SYNTHETIC)
    # Written again only when the real pairs, the synthetic ones (a new teacher's) or the settings change.
    written = (tmp_path / "mixed" / "manifest.json").stat().st_mtime_ns
    assert mix(config).fingerprint() == mixed.fingerprint()
    assert (tmp_path / "mixed" / "manifest.json").stat().st_mtime_ns == written
    _synthesis(tmp_path / "syn", digest="d2")
    assert mix(config).manifest["provenance"]["made_of"]["synthetic_digest"] == "d2"

    dataset = make_dataset(mixed, "train", tokenizer, InputConfig(tokens_per_batch=256, max_length=64),
                           training=False)
    sources = [text.decode() for (source, _), _ in dataset for text in tokenizer.detokenize(source).numpy()]
    assert len(sources) == 3 * len(REAL) + len(SYNTHETIC)
    def as_read(texts):  # what the vocabulary makes of a text ("<" may be an unknown piece to it)
        return sorted(t.decode() for t in tokenizer.detokenize(tokenizer.tokenize(texts)).numpy())

    assert sorted(sources) == as_read([s for s, _ in REAL] * 3 + [f"<bt> {s}" for s, _ in SYNTHETIC])

    untagged = mix(from_dict(MixConfig, {**config.__dict__, "tag": "", "noise": NoiseConfig(),
                                         "output_dir": str(tmp_path / "plain")}))
    assert {s for s, _ in SYNTHETIC} <= {s for s, _ in untagged.pairs("train")}


def test_noise_drops_blanks_and_shuffles_words_within_the_window():
    words = [f"w{i}" for i in range(200)]
    rng = random.Random(0)
    dropped = noised(" ".join(words), NoiseConfig(word_drop=0.1), rng).split()
    assert 150 < len(dropped) < 200 and dropped == [w for w in words if w in set(dropped)]  # order kept
    blanked = noised(" ".join(words), NoiseConfig(word_blank=0.1), rng).split()
    assert len(blanked) == 200 and 5 < blanked.count(BLANK) < 40
    shuffled = noised(" ".join(words), NoiseConfig(shuffle_window=3), rng).split()
    assert sorted(shuffled) == sorted(words) and shuffled != words
    assert all(abs(shuffled.index(w) - i) <= 3 for i, w in enumerate(words))
    assert noised("one", NoiseConfig(word_drop=0.99), random.Random(1)) == "one"  # never empty


def test_mix_settings_are_checked_by_name():
    with pytest.raises(ConfigError, match="MixConfig.corpus=None: name the directory"):
        from_dict(MixConfig, {"synthetic_dir": "s"})
    with pytest.raises(ConfigError, match="real_upsample"):
        from_dict(MixConfig, {"corpus": "c", "synthetic_dir": "s", "real_upsample": 0})
    with pytest.raises(ConfigError, match="tag"):
        from_dict(MixConfig, {"corpus": "c", "synthetic_dir": "s", "tag": "two words"})
    with pytest.raises(ConfigError, match="word_drop"):
        from_dict(MixConfig, {"corpus": "c", "synthetic_dir": "s", "noise": {"word_drop": 1.5}})
