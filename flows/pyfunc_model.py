"""The models-from-code file of the project's MLflow model (MLflow's "models from code").

``flows.registry.save_pyfunc`` hands MLflow this file's path instead of a pickled object: MLflow copies
it into the model directory and runs it at load time, so a registered model holds no pickle to trust
(MLflow warns about, and is moving away from, CloudPickle-serialised models). The task is read from the
model's ``model_config`` in :meth:`flows.serving.ExportedModel.load_context`.
"""

from mlflow.models import set_model

from flows.serving import ExportedModel

set_model(ExportedModel())
