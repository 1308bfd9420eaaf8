"""Tests of tfest_kit.keras_bridge: real Keras models converted and run as Estimators."""

from __future__ import annotations

import numpy as np
import pytest

from tfest_kit._errors import TfestKitError
from tfest_kit._tf import tf, tf2
from tfest_kit.keras_bridge import check_keras_version, to_estimator

keras = tf2.keras
RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 4)).astype("float32")
Y = (X[:, 0] + X[:, 1] > 0).astype("float32")[:, None]


def _compile(model):
    model.compile(
        keras.optimizers.Adam(0.05),
        keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=["accuracy", keras.metrics.AUC(name="auc")],
    )
    return model


def _sequential():
    return _compile(
        keras.Sequential(
            [
                keras.layers.Dense(8, activation="relu", input_shape=(4,)),
                keras.layers.BatchNormalization(),
                keras.layers.Dense(1),
            ]
        )
    )


def _functional():
    inp = keras.Input((4,), name="features")
    hidden = keras.layers.Dense(8, activation="relu")(inp)
    hidden = keras.layers.BatchNormalization()(hidden)
    model = keras.Model(inp, keras.layers.Dense(1)(hidden))
    model.layers[1].trainable = False  # frozen layers must be warm-started too
    return _compile(model)


def _multi_input():
    a = keras.Input((2,), name="a_input")
    b = keras.Input((2,), name="b")
    merged = keras.layers.Concatenate()([keras.layers.Dense(4)(a), keras.layers.Dense(4)(b)])
    return _compile(keras.Model([a, b], keras.layers.Dense(1)(merged)))


def _predict(est, features):
    def input_fn():
        if isinstance(features, tuple):
            # Estimator reads a bare 2-tuple as (features, labels); predict ignores the labels.
            return tf.data.Dataset.from_tensor_slices((features, Y)).batch(16)
        return tf.data.Dataset.from_tensor_slices(features).batch(16)

    return np.stack([next(iter(row.values())) for row in est.predict(input_fn)])


def _fit_a_little(model, x):
    # Moves BatchNormalization statistics away from their initial values.
    model.fit(x, Y, epochs=2, batch_size=16, verbose=0)
    return model.predict(x, verbose=0)


@pytest.mark.parametrize(
    "build, features",
    [
        (_sequential, lambda: X),  # bare tensor
        (_functional, lambda: {"features": X}),  # exact name
        (_functional, lambda: {"x": X}),  # one key, one input
        (_multi_input, lambda: (X[:, :2], X[:, 2:])),  # tuple in input order
        (_multi_input, lambda: {"a": X[:, :2], "b": X[:, 2:]}),  # "_input" suffix dropped
    ],
    ids=[
        "sequential-tensor",
        "functional-dict",
        "functional-other-key",
        "multi-tuple",
        "multi-dict",
    ],
)
def test_predictions_equal_keras_predict(build, features, tmp_path):
    model = build()
    x = [X[:, :2], X[:, 2:]] if len(model.inputs) == 2 else X
    expected = _fit_a_little(model, x)
    est = to_estimator(model, model_dir=str(tmp_path))
    np.testing.assert_allclose(_predict(est, features()), expected, rtol=1e-5, atol=1e-5)


def test_evaluate_has_keras_metric_names_and_training_lowers_loss(tmp_path):
    est = to_estimator(_functional(), model_dir=str(tmp_path))

    def train_fn():
        return tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16)

    def eval_fn():
        return tf.data.Dataset.from_tensor_slices(({"inputs": X}, {"label": Y})).batch(16)

    before = est.evaluate(eval_fn)
    est.train(train_fn, steps=40)
    after = est.evaluate(eval_fn)
    assert {"accuracy", "auc", "loss", "global_step"} <= set(after)
    assert after["global_step"] == 40
    assert after["loss"] < before["loss"]


def test_input_name_mismatch_is_one_readable_error(tmp_path):
    est = to_estimator(_multi_input(), model_dir=str(tmp_path))
    with pytest.raises(ValueError) as info:
        _predict(est, {"left": X[:, :2], "right": X[:, 2:]})
    message = str(info.value)
    assert "\n" not in message and "\\n" not in message
    assert "expected ['a_input', 'b']" in message
    assert "received ['left', 'right']" in message


def test_wrong_number_of_tensors_names_the_inputs(tmp_path):
    est = to_estimator(_multi_input(), model_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"single tensor but the Keras model has 2 inputs"):
        _predict(est, X)


def test_uncompiled_model_is_refused():
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
    with pytest.raises(ValueError, match=r"not been compiled: call model.compile"):
        to_estimator(model)


def test_bad_checkpoint_format_and_model_type():
    with pytest.raises(ValueError, match="checkpoint_format"):
        to_estimator(_sequential(), checkpoint_format="h5")
    with pytest.raises(TypeError, match="must be a tf.keras.Model"):
        to_estimator(object())


def swishy(x):
    return x * tf2.sigmoid(x)


def test_missing_custom_object_is_named(tmp_path):
    def build():
        model = keras.Sequential([keras.layers.Dense(4, activation=swishy, input_shape=(4,))])
        return _compile(model)

    with pytest.raises(ValueError, match=r"custom_objects=\{'swishy': swishy\}"):
        to_estimator(build(), model_dir=str(tmp_path / "a"))
    est = to_estimator(build(), model_dir=str(tmp_path / "b"), custom_objects={"swishy": swishy})
    assert _predict(est, X).shape == (64, 4)


def test_keras_3_is_refused_with_versions_to_install():
    check_keras_version("2.15.0")
    with pytest.raises(TfestKitError, match=r"Keras 3\.1\.0.*pip install tensorflow==2\.15\.1"):
        check_keras_version("3.1.0")
