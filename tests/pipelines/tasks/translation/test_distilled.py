"""The bundled distilled training targets (pipelines/tasks/translation/distilled.py) and ``data.train_targets``."""

import json
import shutil

import pytest

from pipelines.config import ConfigError, SettingError
from pipelines.corpus import Corpus
from pipelines.tasks.translation import ddtp
from pipelines.tasks.translation.distilled import DISTILLED_DIR, MANIFEST, TARGETS, distilled_targets
from pipelines.tasks.translation.sources import SourceConfig, prepare_corpus
from pipelines.textfiles import DataError


def test_the_bundled_targets_are_one_line_per_train_pair_and_mostly_the_teacher_s():
    shipped = ddtp.shipped_corpus("en-de")
    targets = distilled_targets()
    references = list(shipped.lines("train", "de"))
    manifest = json.loads((DISTILLED_DIR / MANIFEST).read_text("utf-8"))
    assert len(targets) == len(references) == manifest["lines"] == manifest["distilled"] + manifest["references_kept"]
    changed = sum(t != r for t, r in zip(targets, references))
    # Not the references: the teacher, trained on these very pairs, gives about a quarter of them back word
    # for word (27% for the shipped hour's teacher), and the rest are its own.
    assert changed > 0.6 * len(targets) and all(targets)


def test_distilled_targets_replace_the_train_references_only(tmp_path):
    shipped = ddtp.shipped_corpus("en-de")
    corpus = Corpus.load(prepare_corpus(SourceConfig(train_targets="distilled", output_dir=str(tmp_path / "d"))))
    # The cleaning step filters the distilled pairs as any (a length ratio no real pair has).
    distilled = set(zip(shipped.lines("train", "en"), distilled_targets()))
    train = list(corpus.pairs("train"))
    assert set(train) <= distilled and len(train) > 0.95 * len(distilled)
    for split in ("validation", "test", "test_unseen"):
        assert list(corpus.pairs(split)) == list(shipped.pairs(split))
    assert corpus.manifest["provenance"]["train_targets"]["teacher"]
    # A directory prepared with them is never rewritten with the references, nor the other way.
    with pytest.raises(ConfigError, match=r"data\.train_targets 'distilled', not 'references'"):
        prepare_corpus(SourceConfig(output_dir=str(tmp_path / "d")))


@pytest.mark.parametrize("settings", [{"language_pair": "en-fr"}, {"language_pair": "de-en"},
                                      {"source": "folder", "folder": "x"}, {"translations_dir": "x"}])
def test_distilled_targets_exist_for_the_bundled_en_de_corpus_alone(settings):
    with pytest.raises(SettingError, match="train_targets"):
        SourceConfig(train_targets="distilled", **settings)
    with pytest.raises(SettingError, match="train_targets.*references"):
        SourceConfig(train_targets="teacher")


def test_targets_that_are_not_the_manifest_s_are_refused_naming_the_file(tmp_path):
    copy = tmp_path / "distilled"
    shutil.copytree(DISTILLED_DIR, copy)
    (copy / TARGETS).write_bytes((copy / TARGETS).read_bytes()[:-8])
    with pytest.raises(DataError, match=rf"{copy / TARGETS}: does not match the checksum"):
        distilled_targets(copy)
