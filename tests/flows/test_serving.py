"""The served model (``mlflow models serve``, as ``make serve`` runs it) answered over real HTTP on
127.0.0.1: each bad request a 400 whose JSON body names the problem in one line and holds no stack
trace, the server answering on after them, and concurrent requests answered as sequential ones."""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest

from flows.serving import (
    MAX_SENTENCES_PER_REQUEST,
    MAX_SOURCE_CHARACTERS,
    THREADS_VARIABLE,
    RequestError,
    request_sentences,
    serving_threads,
)

from .conftest import invocations_request, serve_command, serve_env, start_on_a_free_port, tiny_pyfunc

SENTENCES = ["The package contains the documentation.", "This is a library.", "Run it with care.",
             "Files are copied to the disk.", "", "Ünïcode, emoji 🙂 and 日本語."]


@pytest.fixture(scope="module")
def prefect_server():
    """Serving needs no Prefect API: this module does without the flows' one."""
    yield


@pytest.fixture(scope="module")
def served(tokenizer, tmp_path_factory):
    """The base URL of a tiny model served on 127.0.0.1 (one worker, as ``make serve``)."""
    root = tmp_path_factory.mktemp("served")
    pyfunc = tiny_pyfunc(tokenizer, root)
    server, port = start_on_a_free_port(serve_command(str(pyfunc)), "/ping", root / "serve.log", 300,
                                        env=serve_env(f"sqlite:///{root / 'mlflow.db'}"))
    try:
        yield f"http://127.0.0.1:{port}", pyfunc
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def post(url: str, body) -> tuple[int, str]:
    request = urllib.request.Request(f"{url}/invocations", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def translations(url: str, sentences: list[str]) -> list[str]:
    with urllib.request.urlopen(invocations_request(url, "source", sentences), timeout=120) as response:
        return [p["translation"] for p in json.loads(response.read())["predictions"]]


def split(rows: list) -> dict:
    return {"dataframe_split": {"columns": ["source"], "data": [[row] for row in rows]}}


# The bad requests the model itself refuses, and what its one-line message must name.
REFUSED = {
    "null": (split(["A sentence.", None]), r"source[1] is null"),
    "number": (split([5]), r"source[0] is not a string: 5 (int)"),
    "a record's null": ({"dataframe_records": [{"source": None}]}, "source[0] is null"),
    "too long": (split(["word " * 2000]), f"source[0] is 10,000 characters long; at most "
                                          f"{MAX_SOURCE_CHARACTERS:,} a row"),
    "too many": (split(["A sentence."] * (MAX_SENTENCES_PER_REQUEST + 1)),
                 f"{MAX_SENTENCES_PER_REQUEST + 1} sentences in one request; at most {MAX_SENTENCES_PER_REQUEST}"),
}


def test_each_bad_request_gets_a_400_naming_its_problem_and_the_server_answers_on(served):
    url, pyfunc = served
    import mlflow.pyfunc

    expected = mlflow.pyfunc.load_model(str(pyfunc)).predict(pd.DataFrame({"source": SENTENCES}))
    for case, (body, problem) in REFUSED.items():
        status, text = post(url, body)
        assert status == 400, (case, status, text)
        assert "Traceback" not in text and "stack_trace" not in text, (case, text)
        answer = json.loads(text)
        assert answer["error_code"] == "INVALID_PARAMETER_VALUE", (case, answer)
        assert problem in answer["message"] and "\n" not in answer["message"], (case, answer)
    # A request without the column: one line naming the column, not MLflow's echo of the request.
    for columns in (["text"], ["text", "other"]):
        status, text = post(url, {"dataframe_split": {"columns": columns, "data": [["A sentence."] * len(columns)]}})
        assert status == 400 and "Traceback" not in text and "stack_trace" not in text, text
        assert json.loads(text)["message"] == "no column 'source' in the request: the sentences go in column " \
                                              "'source', one a row", text

    assert translations(url, SENTENCES) == expected["translation"].tolist()
    assert post(url, split([])) == (200, json.dumps({"predictions": []}))
    longest = "x" * MAX_SOURCE_CHARACTERS  # the limit itself is translated
    assert len(translations(url, [longest])) == 1


def test_concurrent_requests_are_answered_as_sequential_ones(served):
    url, _ = served
    requests = [[SENTENCES[i % len(SENTENCES)], SENTENCES[(i + 1) % len(SENTENCES)]] for i in range(12)]
    sequential = [translations(url, sentences) for sentences in requests]
    with ThreadPoolExecutor(max_workers=4) as clients:  # 4 clients, 3 requests each
        concurrent = list(clients.map(lambda sentences: translations(url, sentences), requests))
    assert concurrent == sequential
    assert all(len(answer) == len(sentences) for answer, sentences in zip(concurrent, requests))


@pytest.mark.parametrize(("model_input", "problem"), [
    (pd.DataFrame({"source": ["a", float("nan")]}), "source[1] is null"),
    (pd.DataFrame({"source": pd.array(["a", None], dtype="string")}), "source[1] is null"),
    (pd.DataFrame({"source": [b"bytes"]}), "source[0] is not a string: b'bytes' (bytes)"),
    (pd.DataFrame({"text": ["a"], "other": ["b"]}), "no column 'source' among the request's columns"),
    (pd.DataFrame(), "no column 'source' in the request: the sentences go in column 'source'"),
    ("one string", "expected a column of sentences, got a single str"),
    (["a"] * (MAX_SENTENCES_PER_REQUEST + 1), f"{MAX_SENTENCES_PER_REQUEST + 1} sentences in one request"),
    (["y" * (MAX_SOURCE_CHARACTERS + 1)], f"source[0] is {MAX_SOURCE_CHARACTERS + 1:,} characters long"),
])
def test_a_direct_predict_refuses_the_same_inputs(model_input, problem):
    with pytest.raises(RequestError) as refused:
        request_sentences(model_input)
    assert problem in refused.value.message and "\n" not in refused.value.message
    assert refused.value.get_http_status_code() == 400


def test_a_server_whose_port_was_taken_meanwhile_starts_again_on_another(tmp_path):
    import socket
    import sys

    taken = []

    def command(port):
        if not taken:  # another program binds the port between free_port() and the server
            holder = socket.socket()
            holder.bind(("127.0.0.1", port))
            holder.listen()
            taken.append(holder)
        return [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]

    try:
        server, port = start_on_a_free_port(command, "/", tmp_path / "server.log", 60, cwd=tmp_path)
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        assert port != taken[0].getsockname()[1]
    finally:
        taken[0].close()


def test_a_lone_column_or_a_list_is_the_sentences():
    assert request_sentences(pd.DataFrame({"text": ["a", "b"]})) == ["a", "b"]
    assert request_sentences(["a", ""]) == ["a", ""]
    assert request_sentences(pd.DataFrame({"source": pd.Series([], dtype=object)})) == []


def test_the_threads_variable_is_read_and_a_bad_one_named(monkeypatch):
    from mlflow.exceptions import MlflowException

    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    assert serving_threads() == 0
    monkeypatch.setenv(THREADS_VARIABLE, " 2 ")
    assert serving_threads() == 2
    for bad in ("two", "-1", "1.5"):
        monkeypatch.setenv(THREADS_VARIABLE, bad)
        with pytest.raises(MlflowException, match=f"KERAS_TRANSFORMER_THREADS='{bad}': expected a whole number"):
            serving_threads()


def test_freed_heap_memory_goes_back_to_the_system():
    """What a worker does after each request: freed pages below a live block, which ``free`` keeps,
    are returned, so the process's resident memory falls back."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import ctypes, json
        from flows.serving import release_freed_memory
        from flows.tools.process_memory import tree_rss_bytes
        import os
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc.restype = ctypes.c_void_p
        blocks = [libc.malloc(64 * 1024) for _ in range(1600)]  # 100 MiB, under the mmap threshold
        for block in blocks:
            ctypes.memset(block, 1, 64 * 1024)
        for block in blocks[:-1]:  # the last one stays: the heap's top cannot shrink past it
            libc.free(ctypes.c_void_p(block))
        held = tree_rss_bytes(os.getpid())
        released = release_freed_memory()
        print(json.dumps([held, tree_rss_bytes(os.getpid()), released]))
    """)
    held, after, released = json.loads(subprocess.run([sys.executable, "-c", script], check=True,
                                                      capture_output=True, text=True).stdout)
    assert released
    assert held - after > 80 * 2**20, (held, after)
