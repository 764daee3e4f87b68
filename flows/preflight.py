"""What a pipeline run can find wrong before Prefect, MLflow or TensorFlow start.

A typo in a setting used to cost a temporary Prefect server's start-up (~16 s) and end in 40
lines of tracebacks; a missing data folder, two tracebacks after the first stage began. Each
check here is cheap (files and one HTTP health check), raises the same error the stage would
(:class:`~pipelines.config.ConfigError`, :class:`~pipelines.textfiles.DataError`) and is run
again where the work happens, so a deployment run without this command line fails the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.config import ConfigError


def check_run_dir(run_dir: Path) -> None:
    """``run_dir`` exists (created if need be) and is writable."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"run_dir={str(run_dir)!r}: cannot create it ({err})") from err
    if not os.access(run_dir, os.W_OK):
        raise ConfigError(f"run_dir={str(run_dir)!r}: not writable")


def check_before_start(config: Any, check_data: Callable[[Any], None] | None = None) -> None:
    """Every check a pipeline config allows before anything starts; raises the first error found.

    ``check_data(config.data)`` is the task's own (a data folder or treebank that is not there,
    or files the data stage could not read); a prepared corpus of the run_dir made with other data
    settings (:func:`check_prepared_data`) and a tokenizer trained with other settings are refused
    as the data and tokenizer stages would refuse them.
    """
    from flows.run_state import STATE_FILE, exclusive, read_state
    from flows.tracking import require_server, resolve_tracking_uri
    from pipelines.tokenization import check_existing

    run_dir = Path(config.run_dir)
    if check_data is not None:
        check_data(config.data)
    check_run_dir(run_dir)
    check_prepared_data(config.data)
    check_synthetic(getattr(config, "synthetic", None))
    # The tokenizer stage refuses to retrain the tokenizer earlier runs depend on; its settings say so now.
    check_existing(config.tokenizer, config.tokenizer_dir)
    read_state(run_dir / STATE_FILE)  # a damaged state file names itself
    with exclusive(run_dir):  # another flow run on this run_dir says so now, not after start-up
        pass
    require_server(resolve_tracking_uri(config.tracking, run_dir.resolve()))


def check_prepared_data(data: Any) -> None:
    """The data stage's refusal of a prepared corpus made with other settings (its manifest read,
    no checksum): a run that would rewrite the corpus earlier runs of its run_dir were made from."""
    from pipelines.tasks.parsing.data import TreebankConfig
    from pipelines.tasks.parsing.data import check_prepared as check_treebank
    from pipelines.tasks.translation.sources.config import SourceConfig
    from pipelines.tasks.translation.sources.stage import check_prepared as check_corpus

    if isinstance(data, SourceConfig):
        check_corpus(data)
    elif isinstance(data, TreebankConfig):
        check_treebank(data)


def check_synthetic(settings: Any) -> None:
    """A teacher export that is not there or not an export, a ``models:/`` teacher not named by alias, a pool
    folder that is not there or holds a file that is not text: one line naming the setting, before any work
    (a registered teacher's alias is looked up when the run starts, in its tracking store)."""
    from pipelines.quiet_tensorflow import import_quietly
    from pipelines.tasks.translation.pool import pool_files
    from pipelines.tasks.translation.student import OWN_CHAMPION, registered_name_and_alias
    from pipelines.tasks.translation.synthesis import resolve_teacher
    from pipelines.textfiles import DataError

    if settings is None or not settings.teacher:
        return
    teacher = settings.teacher
    if teacher.startswith("models:/"):
        if registered_name_and_alias(teacher) is None:
            raise ConfigError(f"synthetic.teacher={teacher}: a registered model is named by alias, models:/NAME@ALIAS")
    elif teacher != OWN_CHAMPION:
        import_quietly()  # what an export is, the model library says: TensorFlow imported without its noise
        try:
            resolve_teacher(teacher)
        except (ConfigError, DataError) as err:
            raise type(err)(f"synthetic.teacher: {err}") from None
    try:
        pool_files(settings.pool_config())
    except DataError as err:
        raise DataError(f"synthetic.pool: {err}") from None


def existing_path(setting: str, value: str | None, hint: str = "") -> None:
    """A data setting naming a file or folder that is not there, as the data stage would say it."""
    from pipelines.textfiles import DataError

    if value and not Path(value).expanduser().exists():
        raise DataError(f"{setting}: {value} does not exist{'. ' + hint if hint else ''}")


def check_parallel_files(files: dict[str, tuple[Path, Path]]) -> None:
    """Each split's two files readable as the data stage reads them: UTF-8, not empty, as many
    lines on each side (one streaming pass per file, no sentence kept). The stage would find the
    same, but only once a Prefect server, MLflow and TensorFlow had started."""
    from pipelines.textfiles import DataError

    for source, target in files.values():
        n_source, n_target = _utf8_line_count(source), _utf8_line_count(target)
        if n_source != n_target:  # as pipelines.tasks.translation.cleaning.read_parallel says it
            raise DataError(f"mismatched line counts: {source} has {n_source} lines but {target} has "
                            f"{n_target} lines; the two sides of a parallel corpus must align line by line")


def _utf8_line_count(path: Path) -> int:
    """The lines of ``path`` (compressed or not, as :func:`~pipelines.textfiles.count_lines` counts
    them); :class:`~pipelines.textfiles.DataError` for an empty file, or for invalid UTF-8 with its
    line (found by reading the file again line by line, as the stage would)."""
    import codecs
    import lzma
    import zlib

    from pipelines.textfiles import DataError, open_binary, read_lines

    decoder = codecs.getincrementaldecoder("utf-8")()
    count, last = 0, b"\n"
    try:
        with open_binary(path) as f:
            while chunk := f.read(1 << 20):
                decoder.decode(chunk)
                count += chunk.count(b"\n")
                last = chunk[-1:]
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        for _ in read_lines(path):  # raises, naming the line and byte
            pass
        raise DataError(f"{path}: not valid UTF-8 (it ends inside a character)") from None
    except (OSError, EOFError, lzma.LZMAError, zlib.error) as err:  # unreadable, or a damaged .gz/.xz/.bz2
        raise DataError(f"{path}: cannot be read ({err})") from err
    if count == 0 and last == b"\n":
        raise DataError(f"{path}: empty file")
    return count + (last != b"\n")
