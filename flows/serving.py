"""The MLflow ``pyfunc`` form of an exported model: a column of sentences in, outputs out.

The exported SavedModel (``keras_transformer.decoding.export``) holds the vocabularies and the beam search,
so the pyfunc only feeds it strings; a parser's best hypotheses become a tree over the sentence's
words with the parsing task's tree code. Loading the model (``mlflow.pyfunc.load_model``,
``mlflow models serve --env-manager local``) needs this project installed beside the pinned
requirements (TensorFlow, tensorflow-text, ...); it imports nothing else of the project. The model is
saved from code (:mod:`flows.pyfunc_model`), its task in the model's ``model_config``.

What a request may hold, checked before anything is decoded (a served model answers a request
outside these bounds with HTTP 400 and a JSON body whose ``message`` is one line naming the row and
the problem; a direct ``predict`` raises the same :class:`RequestError`):

- a column ``source``. The signature names it optional, so that MLflow's schema check hands a
  request without it to the model (its columns dropped) instead of refusing it with a message
  that echoes the request over several lines; the model refuses it in one line naming the column;
- every row of the ``source`` column a string (not null, not a number);
- at most :data:`MAX_SOURCE_CHARACTERS` (2,000) characters a row. The decoding's length grows with
  the source's (input length + ``max_length_offset``) and its memory with the square of it: a
  10,000-character source held a worker for 8-22 s and grew the server from 1.4 to 5 GB. 2,000 is
  above every sentence of the bundled corpus (the longest, 1,648). A longer text is refused with
  its length, never cut: send it as several rows (sentences or paragraphs);
- at most :data:`MAX_SENTENCES_PER_REQUEST` (64) rows a request, so that one request cannot hold a
  worker for much longer than others; more go in further requests.

After each request the worker hands the C heap's freed pages back to the system
(:func:`release_freed_memory`): TensorFlow's buffers for a request's shapes are freed into the
allocator's arenas, which otherwise keep them, so that a server's memory grew by a quarter over its
first minutes of varied requests and stayed there.

Each server worker decodes on ``KERAS_TRANSFORMER_THREADS`` threads (:data:`THREADS_VARIABLE`, ``make
serve THREADS=N``; unset or 0: the engine's default, every core), read when the model loads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import logging
import math
import os

import mlflow.pyfunc
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

#: Name of the input column and, per task, of the output column.
INPUT_COLUMN = "source"
OUTPUT_COLUMNS = {"translation": "translation", "parsing": "tree"}

#: The longest source a row may hold, in characters (see the module's docstring).
MAX_SOURCE_CHARACTERS = 2000
#: The most rows one request may hold.
MAX_SENTENCES_PER_REQUEST = 64
#: The environment variable that holds each worker's decoding threads.
THREADS_VARIABLE = "KERAS_TRANSFORMER_THREADS"

logger = logging.getLogger(__name__)


class RequestError(MlflowException):
    """A request the model refuses: HTTP 400 (``INVALID_PARAMETER_VALUE``) and no stack trace.

    The scoring server rewrites the message of an ``MlflowException`` raised in ``predict`` as
    ``"Failed to predict data '<the request as a DataFrame>'. \\nError: <message>"``
    (``mlflow.pyfunc.scoring_server.invocations``), lines that echo the input back; the JSON body it
    answers with (``serialize_as_json``) keeps the problem's own line as its message.
    """

    def __init__(self, problem: str):
        super().__init__(problem, error_code=INVALID_PARAMETER_VALUE)
        self.problem = problem

    def serialize_as_json(self) -> str:
        body = json.loads(super().serialize_as_json())
        body["message"] = self.problem
        return json.dumps(body)


def _is_null(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def request_sentences(model_input) -> list[str]:
    """The sentences of a request (a DataFrame's ``source`` column, or a list of strings), checked
    against the bounds in the module's docstring; :class:`RequestError` names the first problem."""
    if isinstance(model_input, pd.DataFrame):
        columns = [str(c) for c in model_input.columns]
        if INPUT_COLUMN in columns:
            column = INPUT_COLUMN
        elif len(columns) == 1:  # a lone column is the sentences, whatever its name
            column = model_input.columns[0]
        elif not columns:  # what MLflow's schema check leaves of a request without the column
            raise RequestError(f"no column {INPUT_COLUMN!r} in the request: the sentences go in column "
                               f"{INPUT_COLUMN!r}, one a row")
        else:
            raise RequestError(f"no column {INPUT_COLUMN!r} among the request's columns {columns}")
        values = model_input[column].tolist()
    elif isinstance(model_input, (str, bytes)):
        raise RequestError(f"expected a column of sentences, got a single {type(model_input).__name__}")
    else:
        values = list(model_input)
    if len(values) > MAX_SENTENCES_PER_REQUEST:
        raise RequestError(f"{len(values)} sentences in one request; at most {MAX_SENTENCES_PER_REQUEST} "
                           "a request: send the others in further requests")
    for row, value in enumerate(values):
        if _is_null(value):
            raise RequestError(f"{INPUT_COLUMN}[{row}] is null: every row must be a sentence (a string)")
        if not isinstance(value, str):
            raise RequestError(f"{INPUT_COLUMN}[{row}] is not a string: {str(value)[:40]} "
                               f"({type(value).__name__})")
        if len(value) > MAX_SOURCE_CHARACTERS:
            raise RequestError(f"{INPUT_COLUMN}[{row}] is {len(value):,} characters long; at most "
                               f"{MAX_SOURCE_CHARACTERS:,} a row: send a longer text as several rows")
    return [str(value) for value in values]


def serving_threads() -> int:
    """Each worker's decoding threads from :data:`THREADS_VARIABLE` (0: the engine's default)."""
    text = os.environ.get(THREADS_VARIABLE, "").strip() or "0"
    if not text.isdigit():
        raise MlflowException(f"{THREADS_VARIABLE}={text!r}: expected a whole number of threads (0: every core)")
    return int(text)


def limit_tensorflow_threads(threads: int) -> None:
    """TensorFlow's op threads in this process: ``threads`` inside an op, one op at a time."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # TensorFlow already ran something in this process: its pools are fixed
        logger.warning("%s=%d comes too late for this process's TensorFlow; it keeps its threads",
                       THREADS_VARIABLE, threads)


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> bool:
    """Returns the C heap's free pages to the system (``malloc_trim(0)``, every arena); False where
    the C library cannot. Memory still in use is untouched: this costs a few milliseconds, not a
    re-allocation later."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


class ExportedModel(mlflow.pyfunc.PythonModel):
    """Wraps an export directory (artifact ``export``); ``task`` decides the output form."""

    def __init__(self, task: str = "translation"):
        self.task = task

    def load_context(self, context) -> None:
        from keras_transformer.decoding.export import load_exported
        from keras_transformer.tokenizer import without_identity_notice

        # Models saved before models-from-code carry the task on the pickled object instead.
        self.task = (context.model_config or {}).get("task", self.task)
        threads = serving_threads()
        if threads:
            limit_tensorflow_threads(threads)
        with without_identity_notice():  # the SavedModel's SentencePiece ops load their models
            self.translator = load_exported(context.artifacts["export"], threads=threads)

    # The DataFrame hint tells MLflow the input's form; the schema is the explicit signature's.
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        sentences = request_sentences(model_input)
        if self.task == "parsing":
            from pipelines.tasks.parsing.linearize import best_tree
            from pipelines.tasks.parsing.parse_cli import ptb_tokenize

            words = [ptb_tokenize(s) for s in sentences]
            n_best = self.translator.translate([" ".join(w) for w in words], n_best=True)
            outputs = [best_tree(hypotheses, w)[0].to_string() for hypotheses, w in zip(n_best, words)]
        else:
            outputs = self.translator.translate(sentences)
        release_freed_memory()
        return pd.DataFrame({OUTPUT_COLUMNS[self.task]: outputs})
