"""The ``synthetic`` section: its settings checked by name, and the student's corpus settings it makes."""

from __future__ import annotations

import pytest

from pipelines.config import ConfigError, from_dict
from pipelines.tasks.translation.student import SHUFFLE_WINDOW, TAG, SyntheticConfig


def test_the_section_makes_the_mix_settings_tagged_or_not_with_its_noise():
    tagged = from_dict(SyntheticConfig, {"teacher": "champion", "real_upsample": 3, "tag": True,
                                         "noise": 0.1}).mix_config("c", "s", "o")
    assert (tagged.tag, tagged.real_upsample, tagged.corpus, tagged.synthetic_dir) == (TAG, 3, "c", "s")
    assert (tagged.noise.word_drop, tagged.noise.word_blank, tagged.noise.shuffle_window) == (0.1, 0.1, SHUFFLE_WINDOW)
    plain = from_dict(SyntheticConfig, {"teacher": "champion"}).mix_config("c", "s", "o")  # the defaults
    assert plain.tag == "" and (plain.noise.word_drop, plain.noise.shuffle_window) == (0, 0)


@pytest.mark.parametrize("setting, value", [("tag", "no"), ("real_upsample", 0), ("noise", 0.5),
                                            ("real_only_share", 1), ("teacher", " ")])
def test_a_wrong_setting_is_named(setting, value):
    with pytest.raises(ConfigError, match=rf"\b{setting}\b"):
        from_dict(SyntheticConfig, {setting: value})
