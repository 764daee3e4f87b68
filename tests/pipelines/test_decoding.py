"""The decoding settings an evaluation passes on: overrides, the repetition guard, an export's fixed ones."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipelines.config import ConfigError, from_dict
from pipelines.decoding import decoding_kwargs, decoding_record
from pipelines.tasks.translation.evaluation import EvalConfig

TRANSLATOR = SimpleNamespace(model=SimpleNamespace(config=SimpleNamespace(target_vocab_size=50)),
                             decoding=SimpleNamespace(beam_size=4, length_penalty=0.6, max_length_offset=50,
                                                      split_sentences=False, min_length_ratio=0.0,
                                                      coverage_penalty=0.0, repetition_guard=0))


def test_the_guard_is_passed_on_and_recorded():
    kwargs = decoding_kwargs(TRANSLATOR, EvalConfig(beam_size=2, repetition_guard=4))
    assert kwargs == {"beam_size": 2, "repetition_guard": 4, "batch_size": 32}
    assert decoding_record(TRANSLATOR, kwargs) == {"beam_size": 2, "alpha": 0.6, "max_length_offset": 50,
                                                   "repetition_guard": 4}
    # Left unset, the translator's own (the preset's) applies and is recorded when it has one.
    unset = decoding_kwargs(TRANSLATOR, EvalConfig())
    assert "repetition_guard" not in unset and "repetition_guard" not in decoding_record(TRANSLATOR, unset)
    guarded = SimpleNamespace(model=TRANSLATOR.model, decoding=SimpleNamespace(**{**vars(TRANSLATOR.decoding),
                                                                                "repetition_guard": 8}))
    assert decoding_record(guarded, unset)["repetition_guard"] == 8
    off = decoding_kwargs(guarded, EvalConfig(repetition_guard=0))
    assert off["repetition_guard"] == 0 and "repetition_guard" not in decoding_record(guarded, off)


def test_an_export_decodes_only_with_the_guard_it_was_built_with():
    export = SimpleNamespace(settings={"beam_size": 4, "alpha": 0.6, "max_length_offset": 50, "repetition_guard": 4})
    assert decoding_kwargs(export, EvalConfig(repetition_guard=4)) == {"batch_size": 32}
    assert decoding_kwargs(export, EvalConfig()) == {"batch_size": 32}  # the preset's, built in
    assert decoding_record(export, {})["repetition_guard"] == 4
    with pytest.raises(ValueError, match="repetition_guard=4; cannot decode with 0"):
        decoding_kwargs(export, EvalConfig(repetition_guard=0))
    plain = SimpleNamespace(settings={"beam_size": 4, "alpha": 0.6, "max_length_offset": 50})
    with pytest.raises(ValueError, match="repetition_guard=0; cannot decode with 3"):
        decoding_kwargs(plain, EvalConfig(repetition_guard=3))


def test_the_guard_setting_is_checked():
    for bad in (-1, True, 2.5):
        with pytest.raises(ConfigError, match="repetition_guard"):
            from_dict(EvalConfig, {"repetition_guard": bad})


def test_sentence_splitting_is_recorded_when_on():
    splitting = SimpleNamespace(model=TRANSLATOR.model, decoding=SimpleNamespace(**{**vars(TRANSLATOR.decoding),
                                                                                  "split_sentences": True}))
    assert decoding_record(splitting, {})["split_sentences"] is True
    assert "split_sentences" not in decoding_record(TRANSLATOR, {})
    export = SimpleNamespace(settings={"beam_size": 4, "alpha": 0.6, "max_length_offset": 50, "split_sentences": True})
    assert decoding_record(export, {})["split_sentences"] is True


def test_a_length_floor_is_passed_on_recorded_and_checked_against_an_export():
    kwargs = decoding_kwargs(TRANSLATOR, EvalConfig(min_length_ratio=0.5))
    assert kwargs["min_length_ratio"] == 0.5 and decoding_record(TRANSLATOR, kwargs)["min_length_ratio"] == 0.5
    # Left unset, the translator's own (the preset's) applies and is recorded when it has one.
    assert "min_length_ratio" not in decoding_kwargs(TRANSLATOR, EvalConfig())
    floored = SimpleNamespace(model=TRANSLATOR.model, decoding=SimpleNamespace(**{**vars(TRANSLATOR.decoding),
                                                                                "min_length_ratio": 0.6}))
    assert decoding_record(floored, {})["min_length_ratio"] == 0.6
    assert "min_length_ratio" not in decoding_record(floored, {"min_length_ratio": 0.0})
    export = SimpleNamespace(settings={"beam_size": 4, "alpha": 0.6, "max_length_offset": 50, "min_length_ratio": 0.6})
    assert decoding_kwargs(export, EvalConfig(min_length_ratio=0.6)) == {"batch_size": 32}
    assert decoding_record(export, {})["min_length_ratio"] == 0.6
    with pytest.raises(ValueError, match="min_length_ratio=0.6; cannot decode with 0.3"):
        decoding_kwargs(export, EvalConfig(min_length_ratio=0.3))


def test_a_coverage_penalty_is_recorded_from_the_translator_or_the_export():
    assert "coverage_penalty" not in decoding_record(TRANSLATOR, {})
    covering = SimpleNamespace(model=TRANSLATOR.model, decoding=SimpleNamespace(**{**vars(TRANSLATOR.decoding),
                                                                                 "coverage_penalty": 0.2}))
    assert decoding_record(covering, {})["coverage_penalty"] == 0.2
    export = SimpleNamespace(settings={"beam_size": 4, "alpha": 0.6, "max_length_offset": 50, "coverage_penalty": 0.2})
    assert decoding_record(export, {})["coverage_penalty"] == 0.2
    uncovered = SimpleNamespace(settings={**export.settings, "coverage_penalty": 0.0})
    assert "coverage_penalty" not in decoding_record(uncovered, {})
    # An evaluation may override it for a Translator, never for an export built with another.
    kwargs = decoding_kwargs(TRANSLATOR, EvalConfig(coverage_penalty=0.4))
    assert kwargs["coverage_penalty"] == 0.4 and decoding_record(TRANSLATOR, kwargs)["coverage_penalty"] == 0.4
    assert "coverage_penalty" not in decoding_record(covering, {"coverage_penalty": 0.0})
    assert decoding_kwargs(export, EvalConfig(coverage_penalty=0.2)) == {"batch_size": 32}
    with pytest.raises(ValueError, match="coverage_penalty=0.2; cannot decode with 0.4"):
        decoding_kwargs(export, EvalConfig(coverage_penalty=0.4))


def test_the_setting_is_checked():
    with pytest.raises(ValueError, match="repetition_guard"):
        EvalConfig(repetition_guard=-1)
    with pytest.raises(ValueError, match="min_length_ratio=.*: must be a fraction"):
        EvalConfig(min_length_ratio=1.5)
    with pytest.raises(ValueError, match="coverage_penalty=.*: must be >= 0"):
        EvalConfig(coverage_penalty=-0.1)
