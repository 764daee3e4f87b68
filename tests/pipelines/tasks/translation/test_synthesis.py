"""The synthesize stage with a real tiny teacher: pairs written and read back, resumed, refused inputs."""

from __future__ import annotations

import os

import pytest

from pipelines.config import ConfigError, from_dict
from pipelines.corpus import write_corpus
from pipelines.tasks.translation.synthesis import (
    MANIFEST,
    SHARDS,
    SynthesisConfig,
    drop_reason,
    read_synthetic,
    resolve_teacher,
    run_synthesis,
)
from pipelines.textfiles import DataError
from tests.pipelines.tasks.translation.synthesis_support import PAIRS, train_teacher

pytest.importorskip("ctranslate2")

@pytest.fixture(scope="module")
def teacher(verbatim_tokenizer, tmp_path_factory):
    return train_teacher(verbatim_tokenizer, tmp_path_factory.mktemp("teacher") / "export")


@pytest.fixture(scope="module")
def real_pairs(tmp_path_factory):
    """The real pairs whose length ratios bound the synthetic ones'."""
    splits = {"train": list(PAIRS), "validation": [("Held-out words.", "Zurückgehaltene Wörter.")],
              "test": [("Test words.", "Testwörter.")]}
    return write_corpus(tmp_path_factory.mktemp("real") / "en-de", "en", "de", splits, source="t", compress=False)


def _pool(folder, lines):
    folder.mkdir(exist_ok=True)
    (folder / "pool.txt").write_text("".join(f"{line}\n" for line in lines), "utf-8")
    return str(folder)


def _config(tmp_path, teacher, real_pairs, **changes):
    settings = {"teacher": str(teacher), "pool": {"source": "folder", "folder": _pool(tmp_path / "pool", POOL)},
                "corpus": str(real_pairs.directory), "output_dir": str(tmp_path / "out"), "shard_size": 3,
                "threads": 1, "length_ratio_coverage": 1.0, **changes}
    return from_dict(SynthesisConfig, settings)


#: The teacher's own sentences (kept: translated as learnt), a two-sentence paragraph, and lines it cannot
#: translate well; one line repeats.
POOL = [s for s, _ in PAIRS] + ["Fonts for the desktop. Shows the current weather.", "Fonts for the desktop.",
                                "qqq zzz xxx vvv", "Data files for the editor."]


def test_the_stage_translates_the_pool_into_filtered_pairs_read_back(tmp_path, teacher, real_pairs):
    result = run_synthesis(_config(tmp_path, teacher, real_pairs))
    assert result.pool_lines == len(POOL) - 1  # the repeat went with the pool's filters
    assert result.kept + sum(result.dropped.values()) == result.pool_lines
    pairs = read_synthetic(result.output_dir)
    assert len(pairs) == result.kept >= len(PAIRS)
    # A trained teacher translates its own sentences as it learnt them, sentence by sentence in a paragraph.
    # (int8 weights may move a hair's-breadth choice of a few minutes' model: most, not all.)
    assert len(set(PAIRS) & set(pairs)) >= len(PAIRS) - 2, pairs
    translated = dict(pairs)
    assert translated["Fonts for the desktop. Shows the current weather."].startswith("Schriften für den Desktop. ")
    manifest = (tmp_path / "out" / MANIFEST).read_text("utf-8")
    assert str(teacher) in manifest and '"loops"' in manifest


def test_a_half_done_synthesis_resumes_at_the_first_shard_not_written(tmp_path, teacher, real_pairs):
    config = _config(tmp_path, teacher, real_pairs)
    first = run_synthesis(config)
    shards = sorted((tmp_path / "out" / SHARDS).glob("shard-*.txt"))
    assert len(shards) == 4  # 10 lines in shards of 3
    # Stopped after the first shard, while writing the second: its partial file is not a shard.
    for path in shards[1:]:
        path.unlink()
    (tmp_path / "out" / SHARDS / "shard-00001.txt.partial").write_text("half\n", "utf-8")
    os.utime(shards[0], ns=(1, 1))
    again = run_synthesis(config)
    assert shards[0].stat().st_mtime_ns == 1  # not translated again
    assert all(path.is_file() for path in shards)
    assert (again.kept, again.dropped, again.digest) == (first.kept, first.dropped, first.digest)
    # A finished synthesis is read back, not redone.
    before = {p: p.stat().st_mtime_ns for p in shards}
    run_synthesis(config)
    assert {p: p.stat().st_mtime_ns for p in shards} == before
    # Another teacher's shards are not this synthesis' part.
    other = _config(tmp_path, teacher, real_pairs, shard_size=4)
    assert run_synthesis(other).digest == first.digest
    assert len(list((tmp_path / "out" / SHARDS).glob("shard-*.txt"))) == 3


def test_a_missing_teacher_or_a_pool_file_that_is_not_text_is_one_line_before_any_work(tmp_path, teacher,
                                                                                        real_pairs):
    missing = tmp_path / "no-such-export"
    with pytest.raises(DataError, match=rf"^teacher {missing}: no such export directory$"):
        run_synthesis(_config(tmp_path, missing, real_pairs))
    with pytest.raises(DataError, match="not a translator export"):
        resolve_teacher(str(tmp_path))
    with pytest.raises(ConfigError, match="registered model is found by the synthesize task of the flows"):
        resolve_teacher("models:/teacher@champion")
    config = _config(tmp_path, teacher, real_pairs)
    (tmp_path / "pool" / "weights.bin").write_bytes(b"\x00\x01binary")
    with pytest.raises(DataError, match=r"^\S*weights\.bin: not a text file \(a NUL byte at byte 0\)[^\n]*$"):
        run_synthesis(config)
    assert not (tmp_path / "out").exists()  # nothing translated, nothing written
    with pytest.raises(ConfigError, match="SynthesisConfig.teacher=None: name the teacher"):
        from_dict(SynthesisConfig, {})
    with pytest.raises(ConfigError, match="shard_size"):
        from_dict(SynthesisConfig, {"teacher": "x", "shard_size": 0})


@pytest.mark.parametrize("source, translation, reason", [
    ("Fonts for the desktop.", "Schriften für den Desktop.", None),
    ("Fonts for the desktop.", "", "empty"),
    ("Code for the code.", "Code-Code-Code für den Code.", "loops"),
    ("GNU Emacs editor plugins.", "GNU  emacs editor plugins.", "copies_source"),
    ("GNOME", "GNOME", None),  # a name is rightly copied
    ("A library for parsing the configuration files of many programs.", "Bibliothek.", "length_ratio"),
])
def test_each_pair_is_kept_or_dropped_for_one_named_reason(source, translation, reason):
    assert drop_reason(source, translation, (0.5, 2.0), copy_min_words=3) == reason
