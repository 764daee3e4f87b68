"""Shared fixtures. Telemetry is off for every test: the machines have no internet."""

import os

os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# The MLflow servers the tests start run no GenAI job runner: its Huey consumers (several a server) each
# imported MLflow for jobs no test submits.
os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# --- data fixtures (pipelines/tasks/translation/sources.py, pipelines/tokenization.py) --------------------------
# Session-scoped so that the bundled corpus is prepared and the test tokenizer trained once.

from pathlib import Path

import pytest

pytest_plugins = ["tests.file_order"]  # the longest test files first to the xdist workers

#: Raw inputs beside the repository (CI clones the repo with shared/ next to it); may be absent.
SHARED_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
#: Small vocabulary so that training takes about a second; the CPU presets use a few thousand.
TEST_VOCAB_SIZE = 2000


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """``../shared/data`` (raw Debian Translation files, treebank); skips the test if absent."""
    if not SHARED_DATA_DIR.is_dir():
        pytest.skip(f"raw data folder {SHARED_DATA_DIR} is absent")
    return SHARED_DATA_DIR


@pytest.fixture(scope="session")
def toy_treebank(tmp_path_factory) -> Path:
    """The suite's own treebank (tests/pipelines/tasks/parsing/toy_treebank.py): folder holding ``combined/``."""
    from tests.pipelines.tasks.parsing.toy_treebank import write_toy_treebank

    return write_toy_treebank(tmp_path_factory.mktemp("data") / "toy-treebank")


@pytest.fixture(scope="session")
def ddtp_corpus(tmp_path_factory):
    """The bundled En-De DDTP corpus prepared by ``prepare_corpus()`` into a temporary directory."""
    from pipelines.corpus import Corpus
    from pipelines.tasks.translation.sources import SourceConfig, prepare_corpus

    output_dir = tmp_path_factory.mktemp("data") / "ddtp-en-de"
    return Corpus.load(prepare_corpus(SourceConfig(source="ddtp", language_pair="en-de",
                                               output_dir=str(output_dir))))


@pytest.fixture(scope="session")
def tokenizer_model(ddtp_corpus, tmp_path_factory) -> Path:
    """Path of a shared SentencePiece BPE model (vocab ``TEST_VOCAB_SIZE``) trained on it."""
    from pipelines.tokenization import TokenizerConfig, train_tokenizer

    config = TokenizerConfig(vocab_size=TEST_VOCAB_SIZE, input_sentence_size=20000)
    return train_tokenizer(ddtp_corpus, config, tmp_path_factory.mktemp("tokenizer")).source


@pytest.fixture(scope="session")
def tokenizer(tokenizer_model):
    """``SubwordTokenizer`` of ``tokenizer_model`` (pad 0, unk 1, bos 2, eos 3).

    Shared by the whole session, so no test may call ``tf.random.set_seed`` or
    ``keras.utils.set_random_seed``: they reset TensorFlow's resources and with them this
    tokenizer's SentencePiece state (tensorflow/text#570). Seed NumPy / Python instead.
    """
    from keras_transformer.tokenizer import SubwordTokenizer

    return SubwordTokenizer(tokenizer_model)


@pytest.fixture(scope="session")
def verbatim_tokenizer(ddtp_corpus, tmp_path_factory):
    """A ``SubwordTokenizer`` trained as the translation presets train theirs (``verbatim: true``):
    URLs, e-mail addresses and paths are one placeholder piece."""
    from keras_transformer.tokenizer import SubwordTokenizer
    from pipelines.tokenization import TokenizerConfig, train_tokenizer

    config = TokenizerConfig(vocab_size=TEST_VOCAB_SIZE, input_sentence_size=20000, verbatim=True)
    return SubwordTokenizer(train_tokenizer(ddtp_corpus, config, tmp_path_factory.mktemp("verbatim")).source)

