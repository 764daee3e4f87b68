"""The data stage: reruns that do no work, repairs, refusals, atomic writes, settings from YAML."""

import os

import pytest

from keras_transformer import files as files_module
from pipelines import corpus as corpus_module
from pipelines.config import ConfigError, load_config
from pipelines.corpus import MANIFEST, Corpus
from pipelines.tasks.translation.sources import SourceConfig, prepare_corpus
from pipelines.tasks.translation.sources import stage as stage_module
from pipelines.textfiles import DataError


def test_rerun_skips_verified_and_redoes_corrupted(tmp_path, monkeypatch):
    config = SourceConfig(language_pair="en-fr", output_dir=str(tmp_path / "c"))
    out = prepare_corpus(config)
    writes = []
    monkeypatch.setattr(stage_module, "write_corpus",
                        lambda *a, **k: writes.append(1) or corpus_module.write_corpus(*a, **k))
    assert prepare_corpus(config) == out and writes == []  # verified manifest: nothing redone
    # A truncated file (e.g. disk full) fails verification, and a rerun repairs it.
    path = out / "train.fr"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(DataError, match="sha256 .* does not match"):
        Corpus.load(out)
    prepare_corpus(config)
    assert writes == [1]
    Corpus.load(out)
    # Other settings: refused, the corpus earlier runs depend on left as it was (issue 61).
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    config.cleaning.max_words = 100
    with pytest.raises(ConfigError, match=r"manifest.json: the corpus was prepared with other settings "
                                          r"\(data.cleaning.max_words 200, not 100\).*another run_dir"):
        prepare_corpus(config)
    assert writes == [1] and {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert stage_module.up_to_date(SourceConfig(language_pair="en-fr", output_dir=str(out)))
    assert not stage_module.up_to_date(config)


def test_killed_write_leaves_nothing_trusted(tmp_path, monkeypatch):
    """A write killed halfway leaves no manifest and no half file; a rerun starts over."""
    out = tmp_path / "c"
    config = SourceConfig(output_dir=str(out))
    calls = []
    real_fsync = os.fsync

    def dying_fsync(fd):
        calls.append(fd)
        if len(calls) == 3:  # while the third file is being written
            raise KeyboardInterrupt("killed")
        real_fsync(fd)

    monkeypatch.setattr(files_module.os, "fsync", dying_fsync)
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus(config)
    assert not (out / MANIFEST).exists()
    assert not list(out.glob(".*.tmp"))  # the half-written temporary file is gone
    assert sorted(p.name for p in out.iterdir()) == ["train.de", "train.en"]  # complete files
    with pytest.raises(DataError, match="no manifest"):
        Corpus.load(out)
    monkeypatch.setattr(files_module.os, "fsync", real_fsync)
    Corpus.load(prepare_corpus(config))


def test_source_config_yaml(tmp_path):
    path = tmp_path / "stages.yaml"
    path.write_text("data:\n  source: folder\n  folder: /data/mine\n  language_pair: en-fr\n"
                    "  cleaning: {max_words: 80, filter_splits: [train]}\n", encoding="utf-8")
    config = load_config(SourceConfig, path, section="data")
    assert config.cleaning.max_words == 80 and config.cleaning.filter_splits == ("train",)
    assert config.resolved_output_dir().as_posix() == "data/folder-en-fr"
    with pytest.raises(ConfigError, match="source=.*: must be one of"):
        load_config(SourceConfig, _yaml(tmp_path, "source: europarl\n"))
    with pytest.raises(ConfigError, match="needs folder"):
        load_config(SourceConfig, _yaml(tmp_path, "source: folder\n"))
    with pytest.raises(ConfigError, match="language_pair"):
        load_config(SourceConfig, _yaml(tmp_path, "language_pair: english-german-x\n"))


def _yaml(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path
