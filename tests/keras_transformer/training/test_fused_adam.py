"""FusedAdam: Keras' Adam update in TensorFlow's one-pass kernel, and Keras' own where it cannot be."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.training.fused_adam import FusedAdam
from keras_transformer.training.schedules import transformer_adam

SHAPES = [(7, 5), (5,), (3, 4, 2)]


def initial_weights():
    rng = np.random.default_rng(0)
    return [rng.normal(size=shape).astype("float32") for shape in SHAPES]


def run_updates(optimizer, gradients_per_step, *, sparse=False):
    variables = [keras.Variable(w) for w in initial_weights()]
    for gradients in gradients_per_step:
        if sparse:
            gradients = [tf.IndexedSlices(tf.constant(g[:2]), tf.constant([0, 2]), tf.constant(g.shape, tf.int64))
                         if g.ndim == 2 else tf.constant(g) for g in gradients]
        optimizer.apply(gradients, variables)
    return [v.numpy() for v in variables]


def gradients(steps=5):
    rng = np.random.default_rng(1)
    # Gradients over several scales, as a network's are: Adam's update must not depend on them.
    return [[(rng.normal(size=shape) * 10.0 ** rng.integers(-4, 2)).astype("float32") for shape in SHAPES]
            for _ in range(steps)]


@pytest.mark.parametrize("schedule", [False, True])
def test_the_fused_update_is_keras_adams(schedule):
    lr = (lambda: transformer_adam(16, warmup_steps=3)._learning_rate) if schedule else (lambda: 0.01)
    settings = {"beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9}
    fused = FusedAdam(learning_rate=lr(), **settings)
    plain = keras.optimizers.Adam(learning_rate=lr(), **settings)
    got, expected = run_updates(fused, gradients()), run_updates(plain, gradients())
    for g, e, s in zip(got, expected, initial_weights()):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-7)
        assert np.abs(g - s).max() > 1e-3  # guard: the weights moved
    assert int(fused.iterations) == int(plain.iterations) == 5
    for a, b in zip(fused.variables, plain.variables):  # the same slots, in the same order
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-9)


def test_it_takes_the_fused_kernel_for_dense_float_gradients_only():
    optimizer = FusedAdam(0.01)
    dense = tf.zeros([2])
    assert optimizer._fusable(dense, keras.Variable(np.zeros(2, "float32")))
    assert not optimizer._fusable(tf.IndexedSlices(dense, tf.constant([0, 1])), keras.Variable(np.zeros(2, "float32")))
    assert not optimizer._fusable(tf.zeros([2], "float16"), keras.Variable(np.zeros(2, "float16")))
    assert not FusedAdam(0.01, amsgrad=True)._fusable(dense, keras.Variable(np.zeros(2, "float32")))


def test_sparse_gradients_take_keras_update():
    settings = {"learning_rate": 0.01, "beta_2": 0.98, "epsilon": 1e-9}
    got = run_updates(FusedAdam(**settings), gradients(3), sparse=True)
    expected = run_updates(keras.optimizers.Adam(**settings), gradients(3), sparse=True)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-7)


def compiled_step(strategy, optimizer, variable):
    @tf.function
    def step(gradient):
        # Made inside the replica, on its device, as the trainer makes its gradients.
        strategy.run(lambda: optimizer.apply([gradient * 1.0], [variable]))
    return step


def test_under_a_mirrored_strategy_in_a_compiled_function():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    rng = np.random.default_rng(2)
    init = rng.normal(size=(6, 3)).astype("float32")
    grads = [rng.normal(size=(6, 3)).astype("float32") for _ in range(3)]
    results = []
    for cls in (FusedAdam, keras.optimizers.Adam):
        with strategy.scope():
            variable = keras.Variable(init)
            optimizer = cls(learning_rate=0.05, beta_2=0.98, epsilon=1e-9)
            optimizer.build([variable])

        step = compiled_step(strategy, optimizer, variable)
        for g in grads:
            step(tf.constant(g))
        results.append(variable.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-7)
    assert np.abs(results[0] - init).max() > 0.05


def test_config_round_trip_and_the_papers_optimizer_is_fused():
    optimizer = transformer_adam(512, 4000)
    assert isinstance(optimizer, FusedAdam) and optimizer.name == "adam"
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, FusedAdam)
    assert (restored.beta_1, restored.beta_2, restored.epsilon) == (0.9, 0.98, 1e-9)


@pytest.mark.parametrize("saved_with, restored_into", [(keras.optimizers.Adam, FusedAdam),
                                                       (FusedAdam, keras.optimizers.Adam)])
def test_checkpoints_of_either_optimizer_restore_into_the_other(tmp_path, saved_with, restored_into):
    # A run started before FusedAdam resumes from its checkpoint (and a checkpoint goes back):
    # the trainer's checkpoint tracks the optimizer's slots and iterations by name.
    def trained(cls, steps):
        variables = [keras.Variable(w) for w in initial_weights()]
        optimizer = cls(learning_rate=0.01, beta_2=0.98, epsilon=1e-9)
        optimizer.build(variables)
        for grads in gradients(steps):
            optimizer.apply(grads, variables)
        return variables, optimizer

    variables, optimizer = trained(saved_with, 3)
    path = tf.train.Checkpoint(weights=variables, optimizer=optimizer).write(str(tmp_path / "ckpt"))
    fresh, other = trained(restored_into, 0)
    tf.train.Checkpoint(weights=fresh, optimizer=other).read(path).assert_consumed()
    assert int(other.iterations) == 3
    for a, b in zip(other.variables, optimizer.variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(fresh, variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
