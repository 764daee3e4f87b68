"""How a model decodes: one object from the preset to the translator, the export and the record.

Section 6.1: "We used beam search with a beam size of 4 and length penalty alpha = 0.6 ... We set
the maximum output length during inference to input length + 50"; section 6.3 uses 21, 0.3 and
+300 for parsing. A preset's ``decoding`` section is a :class:`DecodingSettings`; a caller that
wants another decoding gives a partial mapping of the same names (:meth:`DecodingSettings.merged`),
merged once. A new decoding option is a field here and a use in the search; nothing else changes.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: A setting taken out of the product -> (the value that is what decoding now always does, why it went): a
#: saved model or an export recording that value still loads; asking for another fails saying why.
REMOVED_SETTINGS: dict[str, tuple[Any, str]] = {"coverage_penalty": (
    0.0, 'it lost to the presets\' decoding without it; see benchmarks/results/README.md, "Tried and dropped"')}


class DecodingSettingError(ValueError):
    """One decoding setting's value is invalid; ``name`` is the field, ``why`` the rule it breaks."""

    def __init__(self, name: str, value: Any, why: str):
        self.name, self.value, self.why = name, value, why
        super().__init__(f"decoding.{name}={value!r}: {why}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class DecodingSettings:
    """Section 6.1's beam search settings, and the options a user of a CPU model adds to them."""

    #: Hypotheses kept at each step (section 6.1: 4; section 6.3's parser: 21).
    beam_size: int = 4
    #: GNMT's length penalty alpha, ((5 + |Y|) / 6) ** alpha (section 6.1: 0.6; section 6.3: 0.3).
    length_penalty: float = 0.6
    #: The longest output is the input's length plus this many pieces (section 6.1: 50; 6.3: 300).
    max_length_offset: int = 50
    #: Translate a paragraph sentence by sentence and list item by list item (the paper's test sets
    #: are single sentences).
    split_sentences: bool = False
    #: Length floor: no output ends before this fraction of its source's pieces (0: none).
    min_length_ratio: float = 0.0
    #: No third copy in a row of an n-gram of up to this many pieces begins (0: none; beam search only).
    repetition_guard: int = 0

    def __post_init__(self) -> None:
        checks = {
            "beam_size": (_is_int, lambda v: v >= 1, "must be a positive integer"),
            "length_penalty": (_is_number, lambda v: v >= 0, "must be a number >= 0"),
            "max_length_offset": (_is_int, lambda v: v >= 0, "must be an integer >= 0"),
            "split_sentences": (lambda v: isinstance(v, bool), lambda v: True, "must be true or false"),
            "min_length_ratio": (_is_number, lambda v: 0 <= v < 1, "must be a fraction in [0, 1)"),
            "repetition_guard": (_is_int, lambda v: v >= 0, "must be 0 (none) or the longest n-gram to stop"),
        }
        for name, (typed, valid, why) in checks.items():
            value = getattr(self, name)
            if not (typed(value) and valid(value)):
                raise DecodingSettingError(name, value, why)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def check_names(cls, overrides: Mapping[str, Any]) -> None:
        """Raises ``DecodingSettingError`` for a name that is not a decoding setting (or was removed)."""
        for name in overrides:
            if name in REMOVED_SETTINGS:
                raise DecodingSettingError(name, overrides[name], f"was removed ({REMOVED_SETTINGS[name][1]})")
            if name not in cls.names():
                close = difflib.get_close_matches(name, cls.names(), n=1, cutoff=0.5)
                hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(cls.names())}"
                raise DecodingSettingError(name, overrides[name], f"not a decoding setting; {hint}")

    def merged(self, overrides: Mapping[str, Any] | None = None) -> DecodingSettings:
        """These settings with ``overrides`` applied (``None`` values leave a setting as it is, and so
        does a removed setting at the value decoding now always has)."""
        overrides = {k: v for k, v in (overrides or {}).items()
                     if v is not None and not (k in REMOVED_SETTINGS and v == REMOVED_SETTINGS[k][0])}
        self.check_names(overrides)
        return dataclasses.replace(self, **overrides) if overrides else self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecodingSettings:
        return cls().merged(data)

    def fixed_record(self, where, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """These settings as a record, for an export at ``where`` that compiled them in: ``overrides``
        that differ are a ``ValueError``, not a silent difference between what was asked and decoded."""
        asked = self.merged(overrides)
        if asked != self:
            differ = {k: v for k, v in asked.to_dict().items() if getattr(self, k) != v}
            raise ValueError(f"{where} was exported with decoding {self.describe()}; it cannot decode with {differ}")
        return self.to_dict()

    def describe(self) -> str:
        """The settings in a log line: the paper's three, then each option that is on."""
        defaults = DecodingSettings()
        line = (f"beam {self.beam_size}, length penalty {self.length_penalty:g}, "
                f"max length input + {self.max_length_offset}")
        options = [f"{name} {value}" for name, value in self.to_dict().items()
                   if name not in ("beam_size", "length_penalty", "max_length_offset")
                   and value != getattr(defaults, name)]
        return ", ".join([line, *options])

