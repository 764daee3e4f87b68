"""The decoding settings an evaluation stage passes on, whatever decodes: a ``Translator`` or an export.

An evaluation config may override the beam size, length penalty and maximum length offset
(section 6.1's 4, 0.6 and +50 for translation; 6.3's 21, 0.3 and +300 for parsing). A
``Translator`` takes them per call; an exported model has its settings compiled in, so asking it
for others is an error rather than a silent difference in the recorded figures.
"""

from __future__ import annotations

from typing import Any


def check_export_settings(settings: dict[str, Any], requested: dict[str, Any]) -> None:
    """Raises ValueError if ``requested`` decoding settings differ from an export's compiled-in ones."""
    for key, value in requested.items():
        if value is not None and settings.get(key) != value:
            raise ValueError(f"the export was built with {key}={settings.get(key)}; cannot decode with {value}")


def is_chart_parser(translator) -> bool:
    """Whether ``translator`` parses by a chart search (``ChartParser`` or its export), not a beam."""
    return hasattr(translator, "bias") and hasattr(translator, "scores")


def decoding_kwargs(translator, config) -> dict[str, Any]:
    """The beam_size / alpha / max_length_offset / min_length_ratio / coverage_penalty /
    repetition_guard overrides of ``config`` (any evaluation config), plus batch_size."""
    kwargs = {
        k: v
        for k, v in (
            ("beam_size", config.beam_size),
            ("alpha", config.alpha),
            ("max_length_offset", config.max_length_offset),
            ("min_length_ratio", getattr(config, "min_length_ratio", None)),
            ("coverage_penalty", getattr(config, "coverage_penalty", None)),
        )
        if v is not None
    }
    if is_chart_parser(translator):  # a chart search: no beam, no length, no guard to set
        return {"batch_size": config.batch_size}
    guard = getattr(config, "repetition_guard", None)
    if guard is not None:
        kwargs["repetition_guard"] = guard
    fixed = getattr(translator, "settings", None)
    if isinstance(fixed, dict):
        check_export_settings({"repetition_guard": 0, **fixed}, kwargs)
        return {"batch_size": config.batch_size}
    return {**kwargs, "batch_size": config.batch_size}


def decoding_record(translator, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The decoding settings actually used, for scores.json."""
    if is_chart_parser(translator):
        return {"search": "cky", "bias": float(translator.bias)}
    settings = getattr(translator, "settings", None)
    if isinstance(settings, dict):  # an exported translator
        record = {k: settings.get(k) for k in ("beam_size", "alpha", "max_length_offset")}
        guard = settings.get("repetition_guard")
        return {**record, **({"repetition_guard": guard} if guard else {}),
                **({"split_sentences": True} if settings.get("split_sentences") else {}),
                **({"min_length_ratio": settings["min_length_ratio"]} if settings.get("min_length_ratio") else {}),
                **({"coverage_penalty": settings["coverage_penalty"]} if settings.get("coverage_penalty") else {})}
    record: dict[str, Any] = {}
    decoding = getattr(translator, "decoding", None)
    if decoding is not None:
        record = {
            "beam_size": decoding.beam_size,
            "alpha": decoding.length_penalty,
            "max_length_offset": decoding.max_length_offset,
        }
        if decoding.split_sentences:  # recorded when on, as the guard: the paper's settings stay three
            record["split_sentences"] = True
        if decoding.min_length_ratio:
            record["min_length_ratio"] = decoding.min_length_ratio
        if decoding.coverage_penalty:
            record["coverage_penalty"] = decoding.coverage_penalty
    record.update({k: v for k, v in kwargs.items() if k not in ("batch_size", "constraint")})
    for optional in ("min_length_ratio", "coverage_penalty"):  # overridden to none: recorded as never set
        if record.get(optional) in (0, None):
            record.pop(optional, None)
    guard = kwargs.get("repetition_guard", getattr(decoding, "repetition_guard", 0))
    record.pop("repetition_guard", None)
    if guard:  # recorded when on, as the other options
        record["repetition_guard"] = guard
    return record
