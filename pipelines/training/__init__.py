"""Training stage: the paper's recipe (section 5) in a tf.distribute custom loop.

* Section 5.2, hardware and schedule: synchronous data parallelism through a tf.distribute
  strategy (:mod:`pipelines.distribution`): every replica processes its own token-bucketed batch,
  gradients are summed across replicas (and machines) before each update.
* Section 5.1, batching: "each training batch contained ... approximately 25000 source tokens
  and 25000 target tokens". ``tokens_per_step`` is that budget per optimizer step; when the
  replicas' batches hold fewer tokens, gradients are accumulated over several batches until the
  budget is reached. The loss of a step is the sum of the per-token losses over every
  non-padding target token of every replica and accumulated batch, divided by their global
  number (not a mean of per-replica or per-sentence means), so the update does not depend on how
  the tokens were spread over replicas and batches.
* Section 5.3, optimizer: Adam(0.9, 0.98, 1e-9) on the warm-up / inverse-square-root schedule.
* Section 5.4, regularisation: dropout (the preset's P_drop) and label smoothing.

Checkpoints (``tf.train.CheckpointManager``) hold the model's weights, the state of its dropout
random generators, the optimizer (moments and iteration count, hence the learning-rate
schedule's position), the step counter, the number of batches consumed, the data stream's
position (the input iterator's state, so a restart continues the stream where it stopped without
replaying it; ``train.data_resume``) and the loss scale. A run resumes from the
newest checkpoint of its directory automatically; checkpoint files and the state file are
written to temporary names and renamed, so killing the process at any moment leaves the
previous checkpoint intact. A non-finite loss or gradient
raises :class:`TrainingDivergedError` before the update is applied, so no bad state is saved.

The package: ``config`` (settings and results); ``runner`` (:func:`train`: builds a run's parts
once, in order, and runs its ``Trainer``); ``trainer`` (the loop, owning its parts); the parts, one
job each: ``steps`` (the compiled step under the strategy), ``checkpointing`` (the run's checkpoint
and directory), ``loss_scale`` (float16's dynamic loss scale), ``budget`` (when a run ends and
saves for averaging), ``validation`` (held-out loss), ``workers`` (decisions all workers share),
``step_log`` (metrics file, log, bar), ``data`` (the training stream and its position); ``state``
(what besides weights a run keeps), ``strategy``; ``stage`` (the stage on a corpus) and ``cli``.

Run from Python with :func:`train`, or from the command line::

    python -m pipelines.training --config train.yaml

with a YAML file holding a ``train:`` section (:class:`TrainConfig`) and a ``data:`` section
(:class:`TrainDataConfig`).
"""

# Imported on first use (PEP 562): reading a TrainConfig must not import the trainer and TensorFlow.
from keras_transformer.lazy_exports import lazy_exports

_EXPORTS = {
    'TrainingBudget': 'pipelines.training.budget',
    'TrainDataConfig': 'pipelines.training.cli',
    'TrainingJobConfig': 'pipelines.training.cli',
    'main': 'pipelines.training.cli',
    'run_from_config': 'pipelines.training.cli',
    'DATA_RESUME': 'pipelines.training.config',
    'METRICS_FILE': 'pipelines.training.config',
    'MIXED_PRECISION': 'pipelines.training.config',
    'TrainConfig': 'pipelines.training.config',
    'TrainingDivergedError': 'pipelines.training.config',
    'TrainResult': 'pipelines.training.config',
    'train': 'pipelines.training.runner',
    'dropout_rng_trackable': 'pipelines.training.state',
    'read_metrics': 'pipelines.training.metrics_file',
    'seeded_initialisation': 'pipelines.training.state',
    'build_configured_strategy': 'pipelines.training.strategy',
    'Trainer': 'pipelines.training.trainer',
    'validation_loss': 'pipelines.training.validation',
}


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)


__all__ = [
    "DATA_RESUME", "METRICS_FILE", "MIXED_PRECISION", "TrainConfig", "TrainDataConfig", "TrainResult", "Trainer",
    "TrainingBudget", "TrainingDivergedError", "TrainingJobConfig", "build_configured_strategy",
    "dropout_rng_trackable", "main", "read_metrics", "run_from_config", "seeded_initialisation", "train",
    "validation_loss",
]
