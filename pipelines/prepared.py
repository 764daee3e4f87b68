"""A prepared corpus is never rewritten for other settings: the check both data stages make.

A run's tokenizer, token caches and models are only good with the corpus they were made from, and
a run_dir's ``data/`` directory is shared by its runs. So a data stage asked for other settings
than those its directory's corpus was prepared with refuses, naming the settings, and
``flows.preflight`` says the same before anything starts (issue 61: a new run must never change
files an earlier run depends on).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipelines.config import ConfigError
from pipelines.corpus import MANIFEST


def setting_differences(recorded: dict[str, Any], wanted: dict[str, Any], prefix: str = "data.") -> list[str]:
    """Each setting that tells two requests apart, by its full name: ``data.cleaning.max_words 200, not 100``."""
    differences = []
    for key in sorted(set(recorded) | set(wanted), key=str):
        old, new = recorded.get(key), wanted.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            differences += setting_differences(old, new, f"{prefix}{key}.")
        elif old != new:
            differences.append(f"{prefix}{key} {old!r}, not {new!r}")
    return differences


def refuse_other_settings(output_dir: Path, stage: str, request: dict[str, Any],
                          ignore: tuple[str, ...] = ()) -> None:
    """Raises :class:`ConfigError` if ``output_dir`` holds a prepared corpus whose manifest says
    ``stage`` made it with other settings than ``request`` (keys in ``ignore`` aside).

    A run's tokenizer, caches and models are only good with the corpus they were made from, so a
    prepared corpus is never rewritten for other settings: the run takes another directory. The
    manifest alone is read (no checksum), so that the check costs nothing before a run starts;
    a directory without a manifest was never completely prepared, and is prepared as before.
    """
    manifest_path = Path(output_dir) / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        recorded = manifest["provenance"][stage]["request"]
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        return
    recorded = {k: v for k, v in recorded.items() if k not in ignore}
    wanted = {k: v for k, v in request.items() if k not in ignore}
    differences = setting_differences(recorded, wanted)
    if differences:
        raise ConfigError(f"{manifest_path}: the corpus was prepared with other settings ({'; '.join(differences)}), "
                          "and the earlier runs of this directory depend on it: give this run another run_dir "
                          "(or data.output_dir), or the data settings it was prepared with")
