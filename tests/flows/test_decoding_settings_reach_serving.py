"""Every decoding setting a model carries reaches what is scored and what is served, unchanged.

One test over all of ``DecodingSettings``' fields, each set to a value that is not its default: a
new field is covered without a new test.
"""

from __future__ import annotations

import json

import pandas as pd

from keras_transformer.decoding.export import load_exported
from keras_transformer.decoding.formats import METADATA_FILE
from keras_transformer.decoding.settings import DecodingSettings
from pipelines.tasks.translation.evaluation import EvalConfig, evaluate
from tests.keras_transformer.tiny_models import tiny_transformer
from tests.pipelines.test_decoding import other_value

from .conftest import served_predictions


def test_every_decoding_setting_reaches_the_record_the_export_the_pyfunc_and_the_served_model(
        ddtp_corpus, tokenizer, tmp_path):
    import mlflow.pyfunc
    from mlflow.models import Model

    from flows.registry import save_pyfunc

    settings = DecodingSettings(**{name: other_value(name) for name in DecodingSettings.names()})
    assert all(getattr(settings, name) != getattr(DecodingSettings(), name) for name in settings.names())
    model = tiny_transformer(tokenizer.vocab_size, num_layers=1)
    model.decoding = settings  # as a model built from a preset carries the preset's
    config = EvalConfig(max_sentences=4, extra_splits=(), attention_examples=0)

    scored = evaluate(model.decoder(tokenizer), ddtp_corpus, config=config, output_dir=tmp_path / "evaluation")
    assert scored.scores["evaluation"]["decoding"] == settings.to_dict()

    export = model.export_decoder(tmp_path / "export", tokenizer)
    assert json.loads((export / METADATA_FILE).read_text("utf-8"))["decoding"] == settings.to_dict()
    exported = evaluate(load_exported(export), ddtp_corpus, config=config, output_dir=tmp_path / "exported")
    assert exported.scores["evaluation"]["decoding"] == settings.to_dict()
    hypotheses = (tmp_path / "evaluation" / "hypotheses.txt").read_text("utf-8").splitlines()
    assert (tmp_path / "exported" / "hypotheses.txt").read_text("utf-8").splitlines() == hypotheses

    sources = (tmp_path / "evaluation" / "sources.txt").read_text("utf-8").splitlines()
    pyfunc = save_pyfunc("translation", export, sources, tmp_path / "pyfunc")
    assert Model.load(str(pyfunc)).metadata["decoding"] == settings.to_dict()
    loaded = mlflow.pyfunc.load_model(str(pyfunc))
    assert loaded.unwrap_python_model().translator.decoding == settings
    assert loaded.predict(pd.DataFrame({"source": sources}))["translation"].tolist() == hypotheses
    served = served_predictions(str(pyfunc), f"sqlite:///{tmp_path / 'mlflow.db'}", "source", sources,
                                tmp_path / "serve.log")
    assert [p["translation"] for p in served] == hypotheses
