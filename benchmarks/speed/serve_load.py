"""The served model under load: ``mlflow models serve`` (as ``make serve`` runs it) on 127.0.0.1 and
real HTTP clients.

    python -m benchmarks.speed.serve_load --model-uri models:/transformer-demo@champion \\
        --tracking-uri sqlite:///$PWD/runs/demo/mlflow.db [--workers 1] [--threads 0] [--rows 1] \\
        [--levels 1,8,32] [--seconds 60] [--rounds 1] [--max-requests 20000] [--sentences FILE] \\
        [--server-env NAME=VALUE ...] [--output benchmarks/results/serve-load-<date>.json]

Starts the server (``--workers`` uvicorn workers, each decoding on ``--threads`` threads: the served
model's ``KERAS_TRANSFORMER_THREADS``), sends one warm-up request, then for each level of ``--levels``
runs that many concurrent clients for ``--seconds`` (or until ``--max-requests`` requests at that
level), each client sending ``--rows`` sentences a request, the sentences of ``--sentences`` (default:
the bundled DDTP En-De test sources) in turn. Then a set of malformed and borderline requests, each
timed with its status and one-line message, and a short request sent while the longest allowed
source is decoded (how long one long input holds other clients back). The clients are the standard
library's (``urllib`` in threads, a new connection a request); nothing leaves the loopback interface.

Reported: per level requests/s and sentences/s, latency p50/p95/p99/max over answered requests and the errors (any
answer but 200, or none within ``--request-timeout``) by kind; the server's memory (from ``/proc``) when
ready, after the load and after the malformed requests, and its growth against ready: summed over its
process tree (``memory_mb``), summed over its workers alone (``worker_memory_mb``: the uvicorn
processes that load the model and decode, the processes of the tree without children; the ``mlflow``
parent's 200-280 MB never grow, and counted in the baseline they hide a fifth of the workers' growth)
and each process's own resident set, anonymous (heap) and file-backed part and threads
(``processes``). With ``--rounds N`` the load and the malformed requests run N times on the same
server, its memory taken after each (a server's memory settles or keeps growing: one round cannot
tell). The server gets ``make serve``'s environment (:data:`MAKE_SERVE_ENV`); ``--server-env NAME=VALUE``
(repeatable) adds to it or overrides it (``TF_ENABLE_ONEDNN_OPTS=1``, ``MALLOC_ARENA_MAX=2``); the report
names them all. A level's figures hold for this machine only: the report names it (its load average
at the start too).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import lzma
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks import ROOT
from flows.tools.process_memory import tree_rss_bytes, tree_statuses
from flows.tools.report import emit

logger = logging.getLogger("serve_load")

DEFAULT_SENTENCES = ROOT / "pipelines" / "tasks" / "translation" / "corpora" / "ddtp" / "en-de" / "test.en.xz"
LEVELS = (1, 8, 32)
#: What ``make serve`` adds to the server's environment (the Makefile's serve target says why).
MAKE_SERVE_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0"}
COLUMN = "source"


def read_sentences(path: Path) -> list[str]:
    """The non-empty lines of a text file (``.xz`` read as such)."""
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        sentences = [line.strip() for line in lines if line.strip()]
    if not sentences:
        raise SystemExit(f"--sentences {path}: no sentence in it")
    return sentences


def body(sentences: list) -> bytes:
    return json.dumps({"dataframe_split": {"columns": [COLUMN], "data": [[s] for s in sentences]}}).encode()


def post(url: str, data: bytes, timeout: float, content_type: str | None = "application/json") -> tuple[int, str]:
    """``(status, body)`` of one POST to ``url``; status 0 and the error's name when none came."""
    headers = {"Content-Type": content_type} if content_type else {}
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")
    except (OSError, urllib.error.URLError) as error:  # refused, reset, timed out
        return 0, type(getattr(error, "reason", error)).__name__


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (``None`` of no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n q / 100)
    return ordered[int(rank) - 1]


# --- the server and its memory


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, in MB."""
    return round(tree_rss_bytes(pid) / 2**20, 1)


def mb(size: int) -> float:
    return round(size / 2**20, 1)


def tree_processes(pid: int) -> list[dict]:
    """Each process of ``pid``'s tree: its role (``server``: ``pid``; ``worker``: one without
    children, which loads the model and answers requests; ``between``: a supervisor or shell), its
    resident set (all, anonymous, file-backed) in MB and its threads."""
    statuses = tree_statuses(pid)
    parents = {status["ppid"] for status in statuses}
    return [{"pid": status["pid"], "name": status.get("name", "?"),
             "role": "server" if status["pid"] == pid else "between" if status["pid"] in parents else "worker",
             "rss_mb": mb(status.get("rss_bytes", 0)), "anon_mb": mb(status.get("anon_bytes", 0)),
             "file_mb": mb(status.get("file_bytes", 0)), "threads": status.get("threads")}
            for status in statuses]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """``mlflow models serve`` of ``model_uri`` on 127.0.0.1, in a process group of its own."""

    def __init__(self, model_uri: str, tracking_uri: str | None, workers: int, log: Path,
                 startup_timeout: float, attempts: int = 3, threads: int = 0, extra_env: dict | None = None):
        from flows.serving import THREADS_VARIABLE

        # As with the virtual environment activated (make serve): the server runs its uvicorn.
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = {**os.environ, "PATH": path, "TF_CPP_MIN_LOG_LEVEL": "2", THREADS_VARIABLE: str(threads),
               **(extra_env or {})}
        if tracking_uri:
            env.update(MLFLOW_TRACKING_URI=tracking_uri, MLFLOW_REGISTRY_URI=tracking_uri)
        self.log = log
        started = time.monotonic()
        # The port is free when chosen but released before the server binds it: another
        # program may take it in between, and then the server starts again on another.
        for attempt in range(1, attempts + 1):
            self.port = free_port()
            with log.open("wb") as output:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri, "--env-manager", "local",
                     "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(workers)],
                    env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
            if self._wait_until_ready(started + startup_timeout):
                break
            text = log.read_text(errors="replace")
            if "address already in use" not in text.lower() or attempt == attempts:
                raise RuntimeError(f"the server exited ({self.process.returncode}) before answering; "
                                   f"its log ({log}) ends: {text[-2000:]}")
            logger.info("port %d was taken before the server bound it; starting again", self.port)
        self.startup_seconds = round(time.monotonic() - started, 1)
        self.url = f"http://127.0.0.1:{self.port}"

    def _wait_until_ready(self, deadline: float) -> bool:
        while self.process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ping", timeout=5):
                    return True
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the server did not answer within the startup timeout; "
                                       f"see {self.log}") from None
                time.sleep(0.5)
        return False

    def rss_mb(self) -> float:
        return tree_rss_mb(self.process.pid)

    def processes(self) -> list[dict]:
        return tree_processes(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a decode still running holds up uvicorn's shutdown
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


# --- the load


def run_level(url: str, sentences: list[str], clients: int, seconds: float, max_requests: int,
              request_timeout: float, rows: int = 1) -> dict:
    """``clients`` threads sending ``rows`` sentences a request for ``seconds`` (at most ``max_requests``
    requests started in all)."""
    order, lock = itertools.cycle(range(len(sentences))), threading.Lock()
    started_requests = [0]
    latencies: list[float] = []
    errors: Counter = Counter()
    stop_at = time.monotonic() + seconds

    def client() -> None:
        while time.monotonic() < stop_at:
            with lock:
                if started_requests[0] >= max_requests:
                    return
                started_requests[0] += 1
                batch = [sentences[next(order)] for _ in range(rows)]
            tick = time.perf_counter()
            status, text = post(f"{url}/invocations", body(batch), request_timeout)
            took = time.perf_counter() - tick
            with lock:
                if status == 200:
                    latencies.append(took)
                else:
                    errors[f"{status} {text[:80]}" if status == 0 else str(status)] += 1

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    elapsed = time.perf_counter() - began
    return {
        "clients": clients, "seconds": round(elapsed, 2), "requests": len(latencies) + sum(errors.values()),
        "answered": len(latencies), "errors": sum(errors.values()), "error_kinds": dict(errors),
        "requests_per_second": round(len(latencies) / elapsed, 2) if elapsed else None,
        "sentences_per_second": round(rows * len(latencies) / elapsed, 2) if elapsed else None,
        "latency_seconds": {name: (None if value is None else round(value, 4)) for name, value in (
            ("p50", percentile(latencies, 50)), ("p95", percentile(latencies, 95)),
            ("p99", percentile(latencies, 99)), ("max", max(latencies) if latencies else None))},
    }


def one_line(text: str) -> str:
    """A JSON error body's message (else the body), as one line of at most 160 characters."""
    try:
        message = str(json.loads(text).get("message", text))
    except (ValueError, AttributeError):
        message = text
    return " ".join(message.split())[:160]


def malformed_requests(max_characters: int, max_rows: int) -> list[tuple[str, bytes, str | None]]:
    """``(case, body, content type)``: what a careless or hostile client sends."""
    json_type = "application/json"
    return [
        ("wrong column", json.dumps({"dataframe_split": {"columns": ["text"], "data": [["A line."]]}}).encode(),
         json_type),
        ("empty data", body([]), json_type),
        ("not JSON", b"source: A line.", json_type),
        ("another JSON shape", json.dumps({"sentences": ["A line."]}).encode(), json_type),
        ("null source", body([None]), json_type),
        ("a number", body([5]), json_type),
        ("invalid UTF-8", b'{"dataframe_split": {"columns": ["source"], "data": [["\xff\xfe"]]}}', json_type),
        ("no content type", body(["A line."]), None),
        (f"{max_rows} sentences (the limit)", body(["A short line."] * max_rows), json_type),
        (f"{max_rows + 1} sentences", body(["A short line."] * (max_rows + 1)), json_type),
        ("10,000-character source", body(["word " * 2000]), json_type),
        (f"{max_characters:,}-character source (the limit)", body([("Words of a long text. " * 200)[:max_characters]]),
         json_type),
    ]


def long_input_hold(url: str, max_characters: int, request_timeout: float) -> dict:
    """A short request sent while the longest allowed source is decoded: what one long input costs
    the other clients."""
    long_body = body([("Words of a long text. " * 200)[:max_characters]])
    short_body = body(["A short line."])
    tick = time.perf_counter()
    status_alone, _ = post(f"{url}/invocations", short_body, request_timeout)
    alone = time.perf_counter() - tick
    with ThreadPoolExecutor(max_workers=1) as pool:
        started = time.perf_counter()
        long_request = pool.submit(post, f"{url}/invocations", long_body, request_timeout)
        time.sleep(0.2)  # the long request first
        tick = time.perf_counter()
        status_beside, _ = post(f"{url}/invocations", short_body, request_timeout)
        beside = time.perf_counter() - tick
        long_status, _ = long_request.result()
        long_seconds = time.perf_counter() - started
    return {"short_alone_seconds": round(alone, 3), "short_beside_long_seconds": round(beside, 3),
            "long_seconds": round(long_seconds, 3), "statuses": [status_alone, status_beside, long_status]}


def measure(args, sentences: list[str], log: Path) -> dict:
    from flows.serving import MAX_SENTENCES_PER_REQUEST, MAX_SOURCE_CHARACTERS

    server = Server(args.model_uri, args.tracking_uri, args.workers, log, args.startup_timeout, threads=args.threads,
                    extra_env=args.server_env)
    try:
        logger.info("serving %s on %s (%d worker(s)), ready after %.1f s", args.model_uri, server.url,
                    args.workers, server.startup_seconds)
        memory, worker_memory, processes = {}, {}, {}

        def take(stage: str) -> None:
            """The tree's and the workers' memory now, as ``stage``."""
            processes[stage] = server.processes()
            memory[stage] = server.rss_mb()
            worker_memory[stage] = round(sum(p["rss_mb"] for p in processes[stage] if p["role"] == "worker"), 1)

        take("ready")
        tick = time.perf_counter()
        status, text = post(f"{server.url}/invocations", body([sentences[0]]), args.request_timeout)
        if status != 200:
            raise RuntimeError(f"the warm-up request was answered {status}: {one_line(text)}")
        first = round(time.perf_counter() - tick, 3)
        take("after_first_request")
        levels, malformed, hold, rounds = [], [], None, []
        for round_ in range(1, args.rounds + 1):
            round_levels = []
            for clients in args.levels:
                level = run_level(server.url, sentences, clients, args.seconds, args.max_requests,
                                  args.request_timeout, args.rows)
                logger.info("round %d, %d client(s): %d requests, %s/s (%s sentences/s), p50 %s s, p99 %s s, "
                            "%d errors", round_, clients, level["requests"], level["requests_per_second"],
                            level["sentences_per_second"], level["latency_seconds"]["p50"],
                            level["latency_seconds"]["p99"], level["errors"])
                round_levels.append(level)
            take("after_load")
            malformed = []
            for case, data, content_type in malformed_requests(MAX_SOURCE_CHARACTERS, MAX_SENTENCES_PER_REQUEST):
                tick = time.perf_counter()
                status, text = post(f"{server.url}/invocations", data, args.request_timeout, content_type)
                malformed.append({"case": case, "status": status, "seconds": round(time.perf_counter() - tick, 3),
                                  "traceback": "Traceback" in text, "message": "" if status == 200 else one_line(text)})
            hold = long_input_hold(server.url, MAX_SOURCE_CHARACTERS, args.request_timeout)
            take("after_malformed")
            levels = levels or round_levels
            rounds.append({"round": round_, "after_load_mb": memory["after_load"],
                           "after_malformed_mb": memory["after_malformed"],
                           "worker_after_load_mb": worker_memory["after_load"],
                           "worker_after_malformed_mb": worker_memory["after_malformed"],
                           "requests": sum(level["requests"] for level in round_levels),
                           "errors": sum(level["errors"] for level in round_levels)})
            logger.info("round %d: memory %s MB after the load, %s MB after the malformed requests (ready: %s MB); "
                        "the worker(s) %s, %s (ready: %s MB)", round_, memory["after_load"], memory["after_malformed"],
                        memory["ready"], worker_memory["after_load"], worker_memory["after_malformed"],
                        worker_memory["ready"])
        status, _ = post(f"{server.url}/invocations", body([sentences[0]]), args.request_timeout)
        for figures in (memory, worker_memory):
            for key in ("after_load", "after_malformed"):
                figures[f"{key}_growth_percent"] = round(100 * (figures[key] / figures["ready"] - 1), 1) \
                    if figures["ready"] else None
    finally:
        server.stop()
    return {"server": {"startup_seconds": server.startup_seconds, "first_request_seconds": first,
                       "answers_after_malformed": status == 200},
            "levels": levels, "errors": sum(r["errors"] for r in rounds), "memory_mb": memory,
            "worker_memory_mb": worker_memory, "processes": processes, "rounds": rounds,
            "malformed": malformed, "long_input": hold,
            "limits": {"max_source_characters": MAX_SOURCE_CHARACTERS,
                       "max_sentences_per_request": MAX_SENTENCES_PER_REQUEST}}


def environment_setting(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` as ``(NAME, VALUE)``."""
    name, equals, value = text.partition("=")
    if not equals or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-uri", required=True, help="what `mlflow models serve -m` takes")
    parser.add_argument("--tracking-uri", help="MLflow tracking and registry URI for a models:/ URI")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn workers (default 1, as make serve)")
    parser.add_argument("--threads", type=int, default=0,
                        help="each worker's decoding threads (KERAS_TRANSFORMER_THREADS; 0, the default: every core)")
    parser.add_argument("--rows", type=int, default=1, help="sentences a request (default 1)")
    parser.add_argument("--levels", type=lambda text: [int(n) for n in text.split(",")], default=list(LEVELS),
                        help="concurrent clients of each level, comma-separated (default 1,8,32)")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of load at each level")
    parser.add_argument("--rounds", type=int, default=1,
                        help="times the levels and the malformed requests are run on the same server, its memory "
                             "taken after each (default 1; the levels reported are the first round's)")
    parser.add_argument("--max-requests", type=int, default=20000, help="requests at most at each level")
    parser.add_argument("--request-timeout", type=float, default=120.0, help="a request unanswered by then is an error")
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    parser.add_argument("--sentences", type=Path, default=DEFAULT_SENTENCES,
                        help="one sentence a line, plain or .xz (default: the bundled DDTP En-De test sources)")
    parser.add_argument("--server-log", type=Path, help="the server's output (default: a temporary file)")
    parser.add_argument("--server-env", type=environment_setting, action="append", default=[], metavar="NAME=VALUE",
                        help="a variable added to the server's environment (repeatable), e.g. MALLOC_ARENA_MAX=2")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    args.server_env = {**MAKE_SERVE_ENV, **dict(args.server_env)}
    if args.workers < 1 or args.rounds < 1 or args.seconds <= 0 or args.max_requests < 1 or not args.levels \
            or min(args.levels) < 1 or args.threads < 0 or not 1 <= args.rows <= 64:
        parser.error("--workers, --rounds, --seconds, --max-requests and every level must be positive, --threads at "
                     "least 0, --rows 1 to 64")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    sentences = read_sentences(args.sentences)
    with tempfile.TemporaryDirectory(prefix="serve-load-") as scratch:
        log = args.server_log or Path(scratch) / "server.log"
        measured = measure(args, sentences, log)
    report = {"benchmark": "serve_load", "model_uri": args.model_uri, "workers": args.workers,
              "threads": args.threads, "rows_per_request": args.rows, "server_env": args.server_env,
              "seconds_per_level": args.seconds, "max_requests_per_level": args.max_requests,
              "sentences": {"file": str(args.sentences), "count": len(sentences)}, **measured}
    emit(report, args.output)
    return 0 if measured["errors"] == 0 and measured["server"]["answers_after_malformed"] else 1


if __name__ == "__main__":
    sys.exit(main())
