"""The command line of the task flows (``python -m flows.translation``, ``flows.parsing``): one
contract for errors and output.

A user error (a setting that does not exist or does not fit, data that is missing or malformed, a
server or network that does not answer) exits 2 with one line naming the file and line, or the
key, of what to fix (and the closest known key for a typo). The settings and whatever else can be
checked cheaply (:mod:`flows.preflight`) are checked before Prefect, MLflow or TensorFlow is
imported, so such a line comes within about a second. Anything else is a bug and keeps its
traceback (exit 1); ``--debug`` shows every traceback, Prefect's included.

Prefect, MLflow and TensorFlow are imported only once the run starts: ``--help`` and a config
error do not wait for them.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import traceback
from typing import TYPE_CHECKING, Any

from flows.pipeline_config import load_pipeline_config, parse_overrides
from flows.preflight import check_before_start
from pipelines.config import ConfigError, merge
from pipelines.textfiles import DataError

if TYPE_CHECKING:
    from flows.results import RunResult
    from flows.task_flows import TaskFlow


def user_errors() -> tuple[type[BaseException], ...]:
    """What a user fixes (settings, data, an unreachable server), not a bug to trace."""
    from pipelines.corpus import OfflineError

    return ConfigError, DataError, OfflineError


def build_parser(prog: str, description: str, default_config: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", default=default_config, help="pipeline YAML file (default %(default)s)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one setting (YAML value), e.g. --set data.path=treebank.zip; repeatable")
    parser.add_argument("--train-steps", type=int,
                        help="override train.train_steps (checkpointing every fifth of them)")
    parser.add_argument("--new-run", action="store_true",
                        help="start a new MLflow run even if the run_dir's last one is unfinished (resume: never)")
    parser.add_argument("--run-id", help="continue this MLflow run (run_id)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of user errors too")
    parser.add_argument("--json", action="store_true",
                        help="print the whole result as one JSON object (for scripts) instead of the summary")
    return parser


def overrides_of(args: argparse.Namespace) -> dict[str, Any]:
    """The nested overrides the options stand for (``--set``, ``--train-steps``, ``--new-run``, ``--run-id``)."""
    overrides = parse_overrides(args.set)
    if args.train_steps is not None:  # 0 too: refused, not taken for "not given"
        if args.train_steps < 1:
            raise ConfigError(f"--train-steps {args.train_steps}: must be a positive number of steps")
        every = max(1, args.train_steps // 5)
        overrides = merge(overrides, {"train": {"train_steps": args.train_steps, "checkpoint_every_steps": every}})
    if args.new_run:
        overrides["resume"] = "never"
    if args.run_id:
        overrides["run_id"] = args.run_id
    return overrides


def one_line(err: BaseException) -> str:
    return re.sub(r"\s*\n\s*", " ", str(err)).strip() or type(err).__name__


class _NoUserErrorTraceback(logging.Filter):
    """Drops the traceback from Prefect's records of a run failed by a user error (the message stays)."""

    def __init__(self, errors: tuple[type[BaseException], ...]):
        super().__init__()
        self.errors = errors

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], self.errors):
            record.exc_info, record.exc_text = None, None
        return True


def main(spec: TaskFlow, argv: list[str] | None = None) -> int:
    """Checks the settings, runs the task's flow, prints what was written, the scores and three examples.

    The flow, and Prefect with it, is made once the settings pass; ``spec.check_data(config.data)``
    is the task's check of its data settings (:mod:`flows.preflight`).
    """
    prog = spec.command
    parser = build_parser(prog, spec.summary, spec.default_config)
    args = parser.parse_args(argv)
    # No logging set-up of our own: Prefect's, once it is imported, shows the project's loggers
    # (PREFECT_LOGGING_EXTRA_LOGGERS, flows/__init__.py) and keeps other libraries' INFO lines out.
    errors = user_errors()
    try:
        overrides = overrides_of(args)
        config = load_pipeline_config(spec.config_class, args.config, overrides, overrides_source="--set")
        check_before_start(config, spec.check_data)
    except errors as err:
        return _fail(prog, err, args.debug)
    if not args.debug:
        for name in ("prefect.flow_runs", "prefect.task_runs"):
            logging.getLogger(name).addFilter(_NoUserErrorTraceback(errors))
    flow = spec.flow()  # Prefect imported: its logging set up
    _start_up()
    try:
        result = flow(args.config, overrides or None)
    except errors as err:
        return _fail(prog, err, args.debug)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        _report(result)
    return 0


def _start_up() -> None:
    """Prefect's temporary API (started when no ``PREFECT_API_URL`` is set) boots in its own process while
    TensorFlow is imported in this one, not after it: seconds off every run's start on a multi-core machine.

    The server process is spawned before TensorFlow's import captures file descriptor 2
    (:mod:`pipelines.quiet_tensorflow`), so that it inherits the real one. If it fails to start, the flow's
    own client starts it again and reports why.
    """
    import threading
    import time

    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    booting = None
    if not PREFECT_API_URL.value() and PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        from prefect.server.api.server import SubprocessASGIServer

        server = SubprocessASGIServer()  # the instance the flow's client uses

        def start() -> None:
            try:
                server.start()
            except Exception:  # noqa: BLE001  (the flow's client starts it again and says why it failed)
                pass

        booting = threading.Thread(target=start, name="prefect-server-start", daemon=True)
        booting.start()
        while booting.is_alive() and server.server_process is None:
            time.sleep(0.01)
    from pipelines.quiet_tensorflow import import_quietly

    import_quietly()  # what every task's stages train on
    if booting is not None:
        booting.join()


def _fail(prog: str, err: BaseException, debug: bool) -> int:
    if debug:
        traceback.print_exception(err, file=sys.stderr)
    print(f"{prog}: error: {one_line(err)}", file=sys.stderr)
    return 2


def _report(result: RunResult) -> None:
    """The job's result, for the terminal: the run and what it wrote, the scores, three examples
    (``--json`` prints the whole result instead)."""
    evaluation, training = result.evaluation, result.training
    print(f"MLflow run {result.run_id} ({result.task}); its files: {result.run_path}")
    if result.page:
        print(f"Its page in MLflow's UI: {result.page} (a run_dir's own store: `make ui STORE=sqlite:///<run_dir>/"
              "mlflow.db` starts the UI)")
    print(f"Trained from step {training.start_step} to {training.final_step}; averaged model: {result.model.path}")
    if result.export is not None:
        print(f"Exported model: {result.export.directory}")
    if result.promotion is not None:
        p = result.promotion
        verdict = "promoted to champion" if p.promoted else f"not promoted ({p.reason})"
        print(f"Registered as {p.model} version {p.challenger_version}: {verdict}")
    if evaluation.headline:
        print(f"\n{evaluation.headline}")
    print(f"\nExamples ({evaluation.split} split):")
    for example in evaluation.examples:
        print(f"  source:    {example['source']}\n  reference: {example['reference']}\n"
              f"  output:    {example['translation']}\n")
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():  # the run's temporary Prefect server stops with it; its records stay
        print("Prefect keeps this flow run, its logs, task graph and artifacts: `prefect server start` shows them.")
