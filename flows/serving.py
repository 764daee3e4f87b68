"""The MLflow ``pyfunc`` form of an exported model: a column of sentences in, outputs out.

The exported SavedModel (``keras_transformer.decoding.export``) holds the vocabularies and the beam search,
so the pyfunc only feeds it strings; a parser's best hypotheses become a tree over the sentence's
words with the parsing task's tree code. Loading the model (``mlflow.pyfunc.load_model``,
``mlflow models serve --env-manager local``) needs this project installed beside the pinned
requirements (TensorFlow, tensorflow-text, ...); it imports nothing else of the project. The model is
saved from code (:mod:`flows.pyfunc_model`), its task in the model's ``model_config``.
"""

from __future__ import annotations

import mlflow.pyfunc
import pandas as pd

#: Name of the input column and, per task, of the output column.
INPUT_COLUMN = "source"
OUTPUT_COLUMNS = {"translation": "translation", "parsing": "tree"}


class ExportedModel(mlflow.pyfunc.PythonModel):
    """Wraps an export directory (artifact ``export``); ``task`` decides the output form."""

    def __init__(self, task: str = "translation"):
        self.task = task

    def load_context(self, context) -> None:
        from keras_transformer.decoding.export import load_exported

        # Models saved before models-from-code carry the task on the pickled object instead.
        self.task = (context.model_config or {}).get("task", self.task)
        self.translator = load_exported(context.artifacts["export"])

    # The DataFrame hint tells MLflow the input's form; the schema is the explicit signature's.
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        if isinstance(model_input, pd.DataFrame):
            column = INPUT_COLUMN if INPUT_COLUMN in model_input.columns else model_input.columns[0]
            sentences = model_input[column].astype(str).tolist()
        else:
            sentences = [str(s) for s in model_input]
        if self.task == "parsing":
            from pipelines.tasks.parsing.linearize import best_tree
            from pipelines.tasks.parsing.parse_cli import ptb_tokenize

            words = [ptb_tokenize(s) for s in sentences]
            n_best = self.translator.translate([" ".join(w) for w in words], n_best=True)
            outputs = [best_tree(hypotheses, w)[0].to_string() for hypotheses, w in zip(n_best, words)]
        else:
            outputs = self.translator.translate(sentences)
        return pd.DataFrame({OUTPUT_COLUMNS[self.task]: outputs})
