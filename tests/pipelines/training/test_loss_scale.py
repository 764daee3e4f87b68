"""Dynamic loss scaling alone: halved on overflow (never below 1), doubled after enough finite steps."""

from pipelines.training.loss_scale import LossScale


def test_overflow_halves_the_scale_and_restarts_the_count(strategy):
    scale = LossScale(strategy, initial=4.0, growth_steps=3)
    scale.grow()
    scale.grow()
    assert scale.shrink(step=7) and scale.value() == 2.0
    assert int(scale.good_steps.numpy()) == 0
    assert scale.shrink(step=8) and scale.value() == 1.0
    # Below 1 the scale would amplify nothing: the caller must give up.
    assert not scale.shrink(step=9) and scale.value() == 1.0


def test_finite_steps_in_a_row_double_the_scale(strategy):
    scale = LossScale(strategy, initial=4.0, growth_steps=3)
    for _ in range(2):
        scale.grow()
    assert scale.value() == 4.0
    scale.grow()
    assert scale.value() == 8.0 and int(scale.good_steps.numpy()) == 0


def test_without_float16_the_scale_stays_one(strategy):
    scale = LossScale(strategy)
    assert not scale.dynamic and scale.value() == 1.0
    for _ in range(5):
        scale.grow()
    assert not scale.shrink(step=1) and scale.value() == 1.0
