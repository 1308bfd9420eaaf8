"""A recipe re-run that trained nothing reuses its export instead of writing an identical one."""

from __future__ import annotations

import os

import numpy as np

from recipes._export import export_once
from tfest_kit import inputs, serving
from tfest_kit._tf import tf, tf2
from tfest_kit.keras_bridge import to_estimator

_X = np.random.RandomState(0).rand(32, 3).astype(np.float32)
_Y = _X.sum(axis=1, keepdims=True)
_RECEIVER = serving.raw_receiver({"x": (tf.float32, [3])})


def _exports(base):
    return sorted(os.path.join(base, d) for d in os.listdir(base) if d.isdigit())


def _linear(model_dir):
    config = tf2.estimator.RunConfig(tf_random_seed=0)
    columns = [tf.feature_column.numeric_column("x", shape=[3])]
    return tf2.estimator.LinearRegressor(columns, model_dir=str(model_dir), config=config)


def _train(estimator, max_steps, key="x", labels=_Y):
    estimator.train(inputs.from_arrays({key: _X}, labels, batch_size=8), max_steps=max_steps)


def test_export_is_reused_until_the_checkpoint_changes(tmp_path):
    base = str(tmp_path / "export")
    estimator = _linear(tmp_path / "model")
    _train(estimator, 2)
    first, reused = export_once(estimator, base, _RECEIVER)
    assert not reused and isinstance(first, str) and os.path.isdir(first)

    assert export_once(estimator, base, _RECEIVER) == (first, True)
    assert _exports(base) == [first]

    _train(estimator, 3)  # one step more: other values, a new export
    second, reused = export_once(estimator, base, _RECEIVER)
    assert not reused and second != first
    assert _exports(base) == [first, second]


def test_another_model_at_the_same_step_is_exported(tmp_path):
    # premade_estimators exports whichever model is best into one base; at the same step the
    # values, not the step, tell the models apart.
    base = str(tmp_path / "export")
    one, other = _linear(tmp_path / "one"), _linear(tmp_path / "other")
    _train(one, 2)
    _train(other, 2, labels=-_Y)
    first, _ = export_once(one, base, _RECEIVER)
    second, reused = export_once(other, base, _RECEIVER)
    assert not reused and second != first
    assert export_once(other, base, _RECEIVER) == (second, True)


def test_keras_bridge_exports_are_reused(tmp_path):
    # to_estimator's object-based checkpoints name variables otherwise than canned Estimators.
    keras = tf2.keras
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,), name="dense")])
    model.compile("sgd", "mse")
    estimator = to_estimator(model, model_dir=str(tmp_path / "model"))
    key = model.input_names[0]
    _train(estimator, 2, key=key)
    receiver = serving.raw_receiver({key: (tf.float32, [3])})
    base = str(tmp_path / "export")
    first, reused = export_once(estimator, base, receiver)
    assert not reused
    assert export_once(estimator, base, receiver) == (first, True)
