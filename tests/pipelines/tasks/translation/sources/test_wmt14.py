"""The ``wmt14`` source: fails fast offline, its URLs and conversion with tfds' mock data, the network probe."""

import socket
import threading

import pytest

from pipelines.corpus import MANIFEST, SPLITS, Corpus, require_network
from pipelines.tasks.translation.sources import SourceConfig, prepare_corpus
from pipelines.tasks.translation.sources import wmt14 as wmt14_module
from pipelines.textfiles import DataError


def test_wmt14_offline_fails_fast_with_clear_message(tmp_path, monkeypatch):
    """Real tfds builder and URL list; the network itself is cut at the socket.

    Fast means one connection attempt, with the short probe timeout, then the error: not a
    download library retrying (counted, not timed: a busy machine is slower, not wrong)."""
    attempts = []

    def offline(address, timeout=None, *args, **kwargs):
        attempts.append((address, timeout))
        raise OSError(101, "Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", offline)
    config = SourceConfig(source="wmt14", language_pair="en-de", network_timeout=3,
                            output_dir=str(tmp_path / "out"), tfds_data_dir=str(tmp_path / "tfds"))
    with pytest.raises(ConnectionError, match=r"cannot download wmt14_translate: .*statmt\.org "
                                              r"is unreachable .*with a 3s timeout.*internet access"):
        prepare_corpus(config)
    assert len(attempts) == 1 and attempts[0][0][0].endswith("statmt.org") and attempts[0][1] == 3, attempts
    assert not (tmp_path / "out" / MANIFEST).exists()


def test_wmt14_urls_and_conversion(tmp_path, monkeypatch):
    """Past the network boundary with tfds' mock data: language mapping and the layout."""
    import tensorflow_datasets as tfds

    config = SourceConfig(source="wmt14", language_pair="en-fr", max_examples=7,
                            output_dir=str(tmp_path / "out"))
    urls = wmt14_module.wmt14_urls(wmt14_module.wmt14_builder(config))
    assert "http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz" in urls
    assert any("giga-fren" in url for url in urls)  # the fr-en training data of the paper
    probed = []
    monkeypatch.setattr(wmt14_module, "require_network",
                        lambda u, **kwargs: probed.extend(u))
    with tfds.testing.mock_data(num_examples=20):
        corpus = Corpus.load(prepare_corpus(config))
    assert probed == urls
    assert (corpus.source_lang, corpus.target_lang) == ("en", "fr")
    for split in SPLITS:
        assert corpus.manifest["cleaning"][split]["input"] == 7
        assert 0 < corpus.counts[split] <= 7
    with pytest.raises(DataError, match="WMT14 in tensorflow-datasets pairs English"):
        wmt14_module.wmt14_builder(SourceConfig(source="wmt14", language_pair="de-fr"))


def test_require_network_times_out_on_a_silent_server(monkeypatch):
    """A server that accepts connections but never answers: the error comes from the timeout.

    What bounds the wait is checked, not how long it took: the probe's one connection carries the
    given timeout (a probe without one fails here at once instead of hanging), and the error is
    that timeout's."""
    real_create_connection = socket.create_connection
    timeouts = []

    def with_timeout(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, *args, **kwargs):
        timeouts.append(timeout)
        assert timeout == 0.5, f"probe of {address} without the given timeout: {timeout}"
        return real_create_connection(address, timeout, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", with_timeout)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        with pytest.raises(ConnectionError, match=r"127.0.0.1.*unreachable \(timed out; .*0.5s timeout") as error:
            require_network([f"http://127.0.0.1:{port}/file.tgz"], timeout=0.5)
        assert isinstance(error.value.__cause__, TimeoutError)
        assert timeouts == [0.5]
    finally:
        server.close()


def test_require_network_accepts_any_http_answer():
    """Reachability only: a 404 from a live server is not an error."""
    import http.server

    requests = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 (the http.server API)
            requests.append(("HEAD", self.path))
            self.send_error(404)

        def do_GET(self):  # noqa: N802
            requests.append(("GET", self.path))
            self.send_error(404)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.handle_request, daemon=True)
    thread.start()
    try:
        require_network([f"http://127.0.0.1:{httpd.server_port}/missing"], timeout=5)
    finally:
        thread.join(5)
        httpd.server_close()
    # The check really asked this server (a refused or unsent request would leave this empty).
    assert [path for _, path in requests] == ["/missing"]
