"""Where a team looks: the name a run has in both UIs, and, for ``make ui``, the page of a store's
newest run in MLflow's.

MLflow 3's UI opens an experiment in its GenAI overview (traces, none here) unless the address asks
for the model-training view, and keeps the runs table's columns per browser: the newest run's page
in that view (:func:`flows.tracking.ui_page`) is where its scores, charts, sentences, pictures and
model are one click away.

    python -m flows.ui sqlite:///runs/demo/mlflow.db [--port 5000]
"""

from __future__ import annotations

import argparse
import datetime
import sys

from flows.tracking import LOCAL_UI, ui_page


def run_name(task: str, preset: str | None, now: datetime.datetime | None = None) -> str:
    """A run's name in Prefect and MLflow alike: its task, its preset and when it started
    (``translation-demo-1206-061530``), so that a team tells runs apart in either UI."""
    stamp = (now or datetime.datetime.now()).strftime("%m%d-%H%M%S")
    return "-".join(part for part in (task, preset, stamp) if part)


def newest_run_page(tracking_uri: str, ui: str = LOCAL_UI) -> str | None:
    """The page, in the UI at ``ui``, of the newest top-level run of any experiment at
    ``tracking_uri``; None if it has no run."""
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY)]
    if not experiments:
        return None
    runs = client.search_runs(experiments, filter_string="tags.mlflow.parentRunId IS NULL",
                              order_by=["attributes.start_time DESC"], max_results=1)
    return ui_page(ui, runs[0].info.experiment_id, runs[0].info.run_id) if runs else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.ui", description=__doc__.split("\n\n")[0])
    parser.add_argument("tracking_uri", help="the store, e.g. sqlite:///runs/demo/mlflow.db")
    parser.add_argument("--port", type=int, default=5000, help="the port the UI listens on (default %(default)s)")
    args = parser.parse_args(argv)
    from flows.relocation import STORE_FILE, local_run_dir

    run_dir = local_run_dir(args.tracking_uri)
    if run_dir is not None and not (run_dir / STORE_FILE).is_file():
        print(f"{parser.prog}: error: {args.tracking_uri}: no MLflow store there yet (make demo makes the "
              "demo's)", file=sys.stderr)
        return 2
    page = newest_run_page(args.tracking_uri, f"http://127.0.0.1:{args.port}")
    print(f"MLflow UI on {args.tracking_uri}: the newest run's page, once the UI has started:\n  "
          f"{page or f'http://127.0.0.1:{args.port} (no run yet)'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
