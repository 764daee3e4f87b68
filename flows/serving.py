"""The MLflow ``pyfunc`` form of an exported model: a column of sentences in, outputs out.

The exported SavedModel (``keras_transformer.export``) holds the vocabularies and the beam search,
so the pyfunc only feeds it strings: ``mlflow.pyfunc.load_model`` and ``mlflow models serve``
need TensorFlow and tensorflow-text, nothing of this project's training code. A parser's output
is turned into a tree over the sentence's words, which needs the parsing task's tree code
(``pipelines.tasks.parsing``, installed with this project).

This file is shipped inside every logged model (``code_paths``) and imports nothing of the
project at module level, so that loading a model never depends on where the project lives.
"""

from __future__ import annotations

import mlflow.pyfunc

#: Name of the input column and, per task, of the output column.
INPUT_COLUMN = "source"
OUTPUT_COLUMNS = {"translation": "translation", "parsing": "tree"}


class ExportedModel(mlflow.pyfunc.PythonModel):
    """Wraps an export directory (artifact ``export``); ``task`` decides the output form."""

    def __init__(self, task: str = "translation"):
        self.task = task

    def load_context(self, context) -> None:
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of the graph)

        self.module = tf.saved_model.load(context.artifacts["export"])

    def _decode(self, sentences: list[str], batch_size: int = 32, n_best: bool = False) -> list:
        import numpy as np
        import tensorflow as tf

        out: list = []
        for start in range(0, len(sentences), batch_size):
            batch = tf.constant(sentences[start:start + batch_size], tf.string)
            if not n_best:
                out.extend(t.decode("utf-8") for t in self.module.translate(batch).numpy())
                continue
            result = self.module.n_best(batch)
            for texts, scores in zip(result["hypotheses"].numpy(), result["scores"].numpy()):
                out.append([t.decode("utf-8") for t, score in zip(texts, scores) if np.isfinite(score)])
        return out

    def predict(self, context, model_input, params=None):
        import pandas as pd

        if isinstance(model_input, pd.DataFrame):
            column = INPUT_COLUMN if INPUT_COLUMN in model_input.columns else model_input.columns[0]
            sentences = model_input[column].astype(str).tolist()
        else:
            sentences = [str(s) for s in model_input]
        if self.task == "parsing":
            from pipelines.tasks.parsing.linearize import best_tree
            from pipelines.tasks.parsing.parse_cli import ptb_tokenize

            words = [ptb_tokenize(s) for s in sentences]
            n_best = self._decode([" ".join(w) for w in words], n_best=True)
            outputs = [best_tree(hypotheses, w)[0].to_string() for hypotheses, w in zip(n_best, words)]
        else:
            outputs = self._decode(sentences)
        return pd.DataFrame({OUTPUT_COLUMNS[self.task]: outputs})
