"""Tests of tfest_kit.keras_bridge: real Keras models converted and run as Estimators."""

from __future__ import annotations

import importlib.util
import os
import warnings

import numpy as np
import pytest

from tfest_kit import serving
from tfest_kit._tf import KERAS_PACKAGE, tf, tf2
from tfest_kit.keras_bridge import to_estimator
from tfest_kit.training import train_and_evaluate

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
    # Fixed initial weights: from some (1 in 8 seeds tried), the frozen layer and the slowly
    # moving BatchNormalization statistics that evaluation uses make the eval loss rise first.
    keras.utils.set_random_seed(0)
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
    with pytest.raises(ValueError, match=r"one tensor per input.*Got: 1 tensors"):
        _predict(est, X)


def test_a_model_converted_before_is_named_not_a_missing_attribute(tmp_path):
    # Keras invalidates the models made before a conversion; the second one said
    # "'Sequential' object has no attribute '_compile_time_distribution_strategy'".
    model = _sequential()
    to_estimator(model, model_dir=str(tmp_path / "first"))
    with pytest.raises(ValueError, match=r"made before an earlier to_estimator call.*build"):
        to_estimator(model, model_dir=str(tmp_path / "second"))
    to_estimator(_sequential(), model_dir=str(tmp_path / "second"))  # a new one converts


def test_model_to_estimators_positional_order_is_refused():
    # model_to_estimator's order (keras_model, keras_model_path, custom_objects, model_dir):
    # a ported call is refused rather than read as (model_dir, config, ...).
    with pytest.raises(TypeError, match="positional argument"):
        to_estimator(_sequential(), None, {"relu": tf2.nn.relu}, "/tmp/model")


def _named():
    # Fixed layer names, so that variables match across models built in one process.
    inp = keras.Input((4,), name="feats")
    hidden = keras.layers.Dense(8, activation="relu", name="hidden")(inp)
    hidden = keras.layers.BatchNormalization(name="norm")(hidden)
    return _compile(keras.Model(inp, keras.layers.Dense(1, name="logit")(hidden)))


def test_warm_start_from_a_path_keeps_batch_norm_statistics_not_the_global_step(tmp_path):
    model = _named()
    expected = _fit_a_little(model, X)
    model.save_weights(str(tmp_path / "keras" / "weights"))

    # Estimator reads a bare path as trainable variables only: the moving statistics were lost.
    est = to_estimator(
        _named(), model_dir=str(tmp_path / "a"), warm_start_from=str(tmp_path / "keras" / "weights")
    )
    np.testing.assert_allclose(_predict(est, X), expected, rtol=1e-5, atol=1e-5)

    est.train(lambda: tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16), steps=1)
    again = to_estimator(_named(), model_dir=str(tmp_path / "b"), warm_start_from=est.model_dir)
    np.testing.assert_allclose(_predict(again, X), _predict(est, X), rtol=1e-5, atol=1e-5)
    again.train(lambda: tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16), steps=1)
    assert again.latest_checkpoint().endswith("model.ckpt-1")  # a warm start, not a resume


def test_warm_start_from_a_path_without_a_checkpoint_is_named_at_once(tmp_path):
    # Both failed in train(), once the graph was built: TensorSliceReader's "no matching files".
    missing = str(tmp_path / "no_such" / "ckpt")
    with pytest.raises(ValueError, match=r"`warm_start_from` does not exist.*no_such/ckpt"):
        to_estimator(_named(), model_dir=str(tmp_path / "a"), warm_start_from=missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="`warm_start_from` is a directory without a checkpoint"):
        to_estimator(_named(), model_dir=str(tmp_path / "b"), warm_start_from=str(empty))
    # A resumed model_dir is not warm-started (Estimator's rule): its source may be gone.
    est = to_estimator(_named(), model_dir=str(tmp_path / "c"))
    est.train(lambda: tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16), steps=1)
    again = to_estimator(_named(), model_dir=est.model_dir, warm_start_from=missing)
    again.train(lambda: tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16), steps=1)
    assert again.latest_checkpoint().endswith("model.ckpt-2")


def test_warm_start_from_a_name_based_checkpoint_of_another_model_is_named_at_once(tmp_path):
    # TensorFlow's "Tensor hidden/bias is not found in … checkpoint" came once train() began.
    def model_fn(features, labels, mode):
        out = tf.layers.dense(features, 1, name="other")
        loss = tf.losses.mean_squared_error(labels, out)
        train_op = tf.train.AdamOptimizer().minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16)

    other = tf.estimator.Estimator(model_fn, str(tmp_path / "other"))
    other.train(input_fn, steps=1)
    with pytest.raises(
        ValueError, match=r"other/model.ckpt-1 lacks .*'hidden/bias'.*prev_var_name"
    ):
        to_estimator(_named(), model_dir=str(tmp_path / "a"), warm_start_from=other.model_dir)
    # The same names, saved by name (checkpoint_format="saver"): warm-started.
    same = to_estimator(_named(), model_dir=str(tmp_path / "b"), checkpoint_format="saver")
    same.train(input_fn, steps=1)
    again = to_estimator(_named(), model_dir=str(tmp_path / "c"), warm_start_from=same.model_dir)
    np.testing.assert_allclose(_predict(again, X), _predict(same, X), rtol=1e-5, atol=1e-5)


def test_warm_start_from_save_weights_matches_automatically_named_layers(tmp_path):
    # Estimator looked the values up by the names saved (dense/kernel); the model built again
    # has dense_2/kernel: "did not contain values for all variables" at the first predict.
    def build():
        layers = [keras.layers.Dense(8, activation="relu", input_shape=(4,))]
        layers += [keras.layers.BatchNormalization(), keras.layers.Dense(1)]
        return _compile(keras.Sequential(layers))

    old = build()
    expected = _fit_a_little(old, X)
    old.save_weights(str(tmp_path / "weights" / "ckpt"))
    path = str(tmp_path / "weights" / "ckpt")
    est = to_estimator(build(), model_dir=str(tmp_path / "a"), warm_start_from=path)
    np.testing.assert_allclose(_predict(est, X), expected, rtol=1e-5, atol=1e-5)
    est.train(lambda: tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16), steps=1)
    assert est.latest_checkpoint().endswith("model.ckpt-1")


def test_an_edited_model_or_optimizer_in_a_trained_model_dir_is_refused(tmp_path):
    # The object-based restore assigned the saved [4, 8] kernel to the edited model's
    # [4, 32] variable: training and the export went on with the old layer sizes.
    def model(units, optimizer):
        layers = [keras.layers.Dense(units, input_shape=(4,)), keras.layers.Dense(1)]
        model = keras.Sequential(layers)
        model.compile(optimizer, keras.losses.BinaryCrossentropy(from_logits=True))
        return model

    def train(keras_model):
        est = to_estimator(keras_model, model_dir=str(tmp_path))
        est.train(lambda: tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16), steps=1)

    train(model(8, "adam"))
    saved = sorted(os.listdir(tmp_path))
    with pytest.raises(ValueError, match=r"layer_with_weights-0/kernel \(checkpoint \[4, 8\], "):
        train(model(32, "adam"))
    with pytest.raises(ValueError, match="another optimizer.*optimizer/"):
        train(model(8, "sgd"))
    assert sorted(os.listdir(tmp_path)) == saved
    train(model(8, "adam"))  # the same model resumes
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("-2")


def _classifier(loss="sparse_categorical_crossentropy"):
    model = keras.Sequential([keras.layers.Dense(3, input_shape=(4,), activation="softmax")])
    model.compile("adam", loss)
    return model


def _data(x, y):
    return lambda: tf.data.Dataset.from_tensor_slices((x, y)).batch(16)


def test_a_feature_wider_than_the_input_is_named_not_blamed_on_the_checkpoint(tmp_path):
    # On a resumed model_dir: "does not fit this model: shapes differ: layer_with_weights-0/
    # kernel"; on a new one: "Shape of variable dense/kernel:0 ((5, 3)) doesn't match".
    ids = (X[:, 0] > 0).astype("int32")
    to_estimator(_classifier(), model_dir=str(tmp_path)).train(_data(X, ids), steps=1)
    wide = np.concatenate([X, X[:, :1]], axis=1)
    for model_dir in (tmp_path, tmp_path / "new"):
        est = to_estimator(_classifier(), model_dir=str(model_dir))
        with pytest.raises(ValueError, match=r"Input '\w+' has shape \(None, 5\).*\(None, 4\)"):
            est.train(_data(wide, ids), steps=1)
    with pytest.raises(ValueError, match=r"has shape \(None, 5\)"):
        est.evaluate(_data(wide, ids))
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("-1")


def test_a_feature_batched_twice_or_exported_with_the_batch_dimension_is_named(tmp_path):
    # Keras said "expected min_ndim=2, found ndim=3" from inside its layer.
    ids = (X[:, 0] > 0).astype("int32")
    model = _classifier()
    est = to_estimator(model, model_dir=str(tmp_path))
    twice = r"\(None, None, 4\) \(batched twice\?.*Input takes \(None, 4\)"
    with pytest.raises(ValueError, match=twice):
        est.train(lambda: _data(X, ids)().batch(2), steps=1)
    est.train(_data(X, ids), steps=1)
    receiver = serving.raw_receiver({model.input_names[0]: (tf.float32, [None, 4])})
    with pytest.raises(ValueError, match=twice):
        est.export_saved_model(str(tmp_path / "export"), receiver)


def test_labels_that_do_not_fit_a_sparse_loss_are_named(tmp_path):
    # Raw op errors before: "Received a label value of 5 which is outside the valid range
    # of [0, 3)" and "logits and labels must have the same first dimension".
    est = to_estimator(_classifier(), model_dir=str(tmp_path))
    ids = np.full(len(X), 5, "int32")
    ids[:3] = [0, 1, -1]
    with pytest.raises(ValueError, match=r"class ids in \[0, 3\).*labels from -1 to 5"):
        est.train(_data(X, ids), steps=1)
    est.train(_data(X, ids % 3), steps=1)
    with pytest.raises(ValueError, match=r"class ids in \[0, 3\).*labels from -1 to 5"):
        est.evaluate(_data(X, ids))
    one_hot = np.eye(3, dtype="float32")[ids % 3]
    for call in (est.train, est.evaluate):
        with pytest.raises(ValueError, match=r"one-hot.*'sparse_categorical_crossentropy'.*argmax"):
            call(_data(X, one_hot), steps=1)
    est = to_estimator(_classifier("categorical_crossentropy"), model_dir=str(tmp_path / "c"))
    est.train(_data(X, one_hot), steps=1)  # one-hot labels for a loss that takes them
    with pytest.raises(ValueError, match=r"`labels` are strings"):  # "Cast string to int64"
        est.train(_data(X, np.array(["a", "b", "c"])[ids % 3]), steps=1)


def test_features_only_or_a_feature_that_is_a_dict_is_named(tmp_path):
    # "You must feed a value for placeholder tensor 'dense_target'"; "Expected any non-tensor
    # type, but got a tensor instead".
    model = _classifier()
    est = to_estimator(model, model_dir=str(tmp_path))
    for call in (est.train, est.evaluate):
        with pytest.raises(
            ValueError, match=r"`input_fn` gave features only: \w+ needs \(features"
        ):
            call(lambda: tf.data.Dataset.from_tensor_slices(X).batch(16), steps=1)
    nested = {model.input_names[0]: {"inner": X}}
    with pytest.raises(ValueError, match=r"Feature '\w+' is a dict: a Keras Input takes one"):
        est.train(_data(nested, (X[:, 0] > 0).astype("int32")), steps=1)


def test_training_data_that_ends_before_the_first_step_is_an_error(tmp_path):
    est = to_estimator(_sequential(), model_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"`input_fn` yielded no batch"):
        est.train(_data(X[:0], Y[:0]), max_steps=5)


def test_subclassed_model_converts_with_saver_checkpoints(tmp_path):
    class Linear(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)

        def call(self, inputs):
            return self.dense(inputs)

    model = _compile(Linear())
    with pytest.raises(
        ValueError, match=r"subclassed.*tf\.keras\.Input.*checkpoint_format='saver'"
    ):
        to_estimator(model, model_dir=str(tmp_path / "a"))
    est = to_estimator(model, model_dir=str(tmp_path / "b"), checkpoint_format="saver")
    assert _predict(est, X).shape == (64, 1)


@pytest.mark.parametrize(
    "build, features",
    [
        (_named, lambda w: {"features": X, "sample_weights": w}),  # official form
        (_named, lambda w: {"features": {"x": X}, "sample_weights": w}),
        (_multi_input, lambda w: {"features": {"a": X[:, :2], "b": X[:, 2:]}, "sample_weights": w}),
        (_multi_input, lambda w: {"features": (X[:, :2], X[:, 2:]), "sample_weights": w}),
        (_named, lambda w: {"x": X, "sample_weights": w}),  # one more key of a features dict
    ],
    ids=["tensor", "dict", "multi-dict", "multi-tuple", "extra-key"],
)
def test_sample_weights_reach_the_keras_loss(build, features, tmp_path):
    # Renaming the outer dict's keys made the official model_fn drop the weights (single
    # input: an unweighted loss, no error) or refuse the features (multi-input).
    est = to_estimator(build(), model_dir=str(tmp_path))
    # Trained first, so that every evaluation reads one checkpoint (an unbuilt Sequential
    # has no Keras weights to start from).
    est.train(lambda: tf.data.Dataset.from_tensor_slices((features(Y[:, 0]), Y)).batch(16))
    assert est.latest_checkpoint().endswith("model.ckpt-4")

    def loss(weights):
        def input_fn():
            return tf.data.Dataset.from_tensor_slices((features(weights), Y)).batch(16)

        return est.evaluate(input_fn)["loss"]

    unweighted = loss(np.ones(len(X), "float32"))
    assert unweighted > 0
    assert loss(np.zeros(len(X), "float32")) == 0.0  # as with the official converter
    assert loss(np.full(len(X), 2.0, "float32")) == pytest.approx(2 * unweighted, rel=1e-5)


@pytest.mark.parametrize(
    "features",
    [{"feats": X, "sample_weights": Y[:, 0]}, {"features": X, "sample_weights": Y[:, 0]}],
    ids=["extra-key", "official"],
)
def test_predict_ignores_sample_weights(features, tmp_path):
    # The official model_fn compiled the weights into PREDICT's uncompiled clone:
    # AttributeError "'Functional' object has no attribute '_training_endpoints'".
    model = _named()
    expected = model.predict(X, verbose=0)
    est = to_estimator(model, model_dir=str(tmp_path))

    def input_fn():
        return tf.data.Dataset.from_tensor_slices((features, Y)).batch(16)

    predicted = np.stack([row["logit"] for row in est.predict(input_fn)])
    np.testing.assert_allclose(predicted, expected, rtol=1e-5, atol=1e-5)


def test_dict_inputs_and_outputs_take_their_dict_keys(tmp_path):
    # The Estimator knew only the layer names ("age_feature", "dense_s"); Keras takes the keys.
    def build():
        inputs = {"age": keras.Input((2,), name="age_feature"), "city": keras.Input((2,))}
        hidden = keras.layers.Concatenate()([inputs["age"], inputs["city"]])
        hidden = keras.layers.Dense(4)(hidden)
        outputs = {"score": keras.layers.Dense(1, name="dense_s")(hidden)}
        outputs["aux"] = keras.layers.Dense(1, name="dense_a")(hidden)
        model = keras.Model(inputs, outputs)
        model.compile(keras.optimizers.legacy.SGD(0.1), "mse")
        return model

    model = build()
    features, labels = {"age": X[:, :2], "city": X[:, 2:]}, {"score": Y, "aux": 1 - Y}
    expected = model.predict(features, verbose=0)
    keras_loss = model.evaluate(features, labels, batch_size=64, verbose=0, return_dict=True)
    est = to_estimator(model, model_dir=str(tmp_path / "a"))

    def input_fn():
        return tf.data.Dataset.from_tensor_slices((features, labels)).batch(64)

    rows = list(est.predict(input_fn))
    for key, name in (("score", "dense_s"), ("aux", "dense_a")):
        predicted = np.stack([row[name] for row in rows])
        np.testing.assert_allclose(predicted, expected[key], rtol=1e-5, atol=1e-5)
    assert est.evaluate(input_fn)["loss"] == pytest.approx(keras_loss["loss"], rel=1e-5)


def test_dict_input_keys_that_name_other_input_layers_follow_the_dict(tmp_path):
    # Keys {"a", "b"} for Input layers named "b" and "a": the features went to the layers of
    # the same name, swapped, where Keras follows the dict's keys.
    inputs = {"a": keras.Input((1,), name="b"), "b": keras.Input((1,), name="a")}
    joined = keras.layers.Concatenate()([inputs["a"], inputs["b"] * 0.0])
    output = keras.layers.Dense(1, name="out", kernel_initializer="ones", use_bias=False)(joined)
    model = keras.Model(inputs, output)
    model.compile(keras.optimizers.legacy.SGD(0.1), "mse")
    features = {"a": X[:, :1], "b": 10 * X[:, 1:2]}
    expected = model.predict(features, verbose=0)
    est = to_estimator(model, model_dir=str(tmp_path))
    np.testing.assert_allclose(_predict(est, features), expected, rtol=1e-5)


def test_label_keys_not_matching_the_outputs_are_one_readable_error(tmp_path):
    inp = keras.Input((4,), name="feats")
    hidden = keras.layers.Dense(4)(inp)
    model = keras.Model(
        inp, [keras.layers.Dense(1, name="cls")(hidden), keras.layers.Dense(1, name="reg")(hidden)]
    )
    model.compile("adam", {"cls": keras.losses.BinaryCrossentropy(from_logits=True), "reg": "mse"})
    est = to_estimator(model, model_dir=str(tmp_path))

    def input_fn(labels):
        return lambda: tf.data.Dataset.from_tensor_slices((X, labels)).repeat().batch(16)

    with pytest.raises(ValueError) as info:
        est.train(input_fn({"label": Y, "target": Y}), steps=1)
    message = str(info.value)
    assert "\n" not in message and "\\n" not in message
    assert "expected ['cls', 'reg']" in message and "received ['label', 'target']" in message
    est.train(input_fn({"cls": Y, "reg": Y, "id": Y}), steps=2)  # extra keys are fine
    assert est.latest_checkpoint().endswith("model.ckpt-2")


@pytest.mark.parametrize("checkpoint_format", ["checkpoint", "saver"])
def test_rerun_to_the_same_max_steps_trains_nothing(tmp_path, checkpoint_format, tf_log_lines):
    # Estimator reads the step back as "global_step", which an object-based checkpoint
    # ("checkpoint") does not have: it started anyway and trained to step 6.
    def train_fn():
        return tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16)

    model_dir = str(tmp_path / checkpoint_format)
    est = to_estimator(_sequential(), model_dir=model_dir, checkpoint_format=checkpoint_format)
    est.train(train_fn, max_steps=5)
    est.train(train_fn, max_steps=5)
    assert tf.train.latest_checkpoint(model_dir).endswith("model.ckpt-5")
    assert any("Skipping training" in line for line in tf_log_lines)
    est.train(train_fn, steps=2)  # counted from the restored step, as before
    est.train(train_fn, max_steps=8)
    assert tf.train.latest_checkpoint(model_dir).endswith("model.ckpt-8")
    with pytest.raises(ValueError, match="Can not provide both steps and max_steps"):
        est.train(train_fn, steps=1, max_steps=8)


def test_numpy_integer_max_steps_is_not_trained_past(tmp_path):
    # Only a Python int was checked: np.int64(3) restarted on a model_dir at step 3 and
    # trained to step 4.
    def train_fn():
        return tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16)

    est = to_estimator(_sequential(), model_dir=str(tmp_path))
    est.train(train_fn, max_steps=np.int64(3))
    est.train(train_fn, max_steps=np.int64(3))
    assert est.latest_checkpoint().endswith("model.ckpt-3")


@pytest.mark.parametrize("checkpoint_format", ["checkpoint", "saver"])
@pytest.mark.parametrize("keep", [1, None])
def test_checkpoints_are_kept_as_the_run_config_says(tmp_path, checkpoint_format, keep):
    # The official object-based saver kept 5 checkpoints whatever keep_checkpoint_max said
    # (None, "keep all", lost all but 5), and wrote absolute paths into the state file.
    model_dir = tmp_path / "run"
    config = tf2.estimator.RunConfig(save_checkpoints_steps=2, keep_checkpoint_max=keep)
    est = to_estimator(
        _sequential(), model_dir=str(model_dir), config=config, checkpoint_format=checkpoint_format
    )
    est.train(lambda: tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16), steps=14)
    kept = sorted(
        int(name.split("-")[1][: -len(".index")])
        for name in os.listdir(model_dir)
        if name.endswith(".index")
    )
    assert kept == ([14] if keep == 1 else [0, 2, 4, 6, 8, 10, 12, 14])
    state = tf.train.get_checkpoint_state(str(model_dir))
    assert state.all_model_checkpoint_paths  # relative names, resolved against model_dir
    assert (model_dir / "checkpoint").read_text().count(str(model_dir)) == 0
    # The moved model_dir still resumes.
    moved = tmp_path / "moved"
    os.rename(model_dir, moved)
    assert tf.train.latest_checkpoint(str(moved)).endswith("model.ckpt-14")


def test_train_and_evaluate_resumes_object_based_checkpoints(tmp_path):
    # The step of an object-based checkpoint is "estimator_global_step/.ATTRIBUTES/…", not
    # "global_step": reading it by the TF1 name failed every run after the first.
    def train_fn():
        return tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16)

    def eval_fn():
        return tf.data.Dataset.from_tensor_slices((X, Y)).batch(32)

    est = to_estimator(_sequential(), model_dir=str(tmp_path))
    assert train_and_evaluate(est, train_fn, eval_fn, max_steps=4)["global_step"] == 4
    assert train_and_evaluate(est, train_fn, eval_fn, max_steps=8)["global_step"] == 8
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-8")


def test_nan_guard_names_the_checkpoint_from_before_the_diverged_weights(tmp_path):
    # The object-based saver lives in the converter's Scaffold, in no SAVERS collection, so
    # NanGuardHook did not see the checkpoint saved in the NaN step.
    from tfest_kit import hooks

    model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
    model.compile(keras.optimizers.legacy.SGD(1e6), "mse")  # diverges within a few steps
    config = tf.estimator.RunConfig(model_dir=str(tmp_path), save_checkpoints_steps=1)
    est = to_estimator(model, config=config)

    def train_fn():
        return tf.data.Dataset.from_tensor_slices((X, Y * 100)).repeat().batch(16)

    with pytest.raises(hooks.NanLossError) as info:
        est.train(train_fn, max_steps=50, hooks=[hooks.NanGuardHook()])
    step = info.value.step
    assert est.latest_checkpoint().endswith(f"model.ckpt-{step + 1}")
    # Not model.ckpt-{step}: its weights gave the non-finite loss.
    assert f"from before it is model.ckpt-{step - 1};" in str(info.value)
    assert f"the latest, model.ckpt-{step + 1}, holds the diverged weights" in str(info.value)


def test_damaged_newest_object_checkpoint_resumes_from_the_one_before_and_evaluate_is_guarded(
    tmp_path,
):
    import glob
    import logging

    from tests.conftest import captured_tf_log

    def train_fn():
        return tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16)

    config = tf2.estimator.RunConfig(save_checkpoints_steps=2)
    est = to_estimator(_sequential(), model_dir=str(tmp_path), config=config)
    est.train(train_fn, max_steps=4)
    data = max(glob.glob(str(tmp_path / "model.ckpt-4.data-*")), key=os.path.getsize)
    os.truncate(data, os.path.getsize(data) // 2)
    with captured_tf_log(logging.WARNING) as lines:
        est.train(train_fn, max_steps=6)
    said = [line for line in lines if "resuming from model.ckpt-2" in line]
    assert len(said) == 1 and "model.ckpt-4" in said[0], lines
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-6")
    # Evaluate, predict and exports find it as training does: a garbled state file made them
    # use fresh weights.
    (tmp_path / "checkpoint").write_text("garbled {{{")

    def predict_fn():
        return tf.data.Dataset.from_tensor_slices(X[:4]).batch(4)

    with captured_tf_log(logging.WARNING) as lines:
        eval_fn = lambda: tf.data.Dataset.from_tensor_slices((X, Y)).batch(16)  # noqa: E731
        assert est.evaluate(eval_fn)["global_step"] == 6
        predicted = list(est.predict(predict_fn))
        assert est.latest_checkpoint().endswith("model.ckpt-6")
    said = [line for line in lines if "uses model.ckpt-6, the newest intact" in line]
    assert len(said) == 3, lines
    step_6 = str(tmp_path / "model.ckpt-6")
    expected = list(est.predict(predict_fn, checkpoint_path=step_6))
    np.testing.assert_array_equal(
        [list(p.values()) for p in predicted], [list(p.values()) for p in expected]
    )

    def endless():
        while True:
            yield X[0], Y[0]

    def generator_fn():
        signature = (tf.TensorSpec([4], tf.float32), tf.TensorSpec([1], tf.float32))
        return tf.data.Dataset.from_generator(endless, output_signature=signature).batch(2)

    class _StopAfter(tf.train.SessionRunHook):
        def begin(self):
            self.calls = 0

        def after_run(self, run_context, run_values):
            self.calls += 1
            if self.calls >= 120:
                run_context.request_stop()

    with captured_tf_log(logging.WARNING) as lines:
        est.evaluate(generator_fn, hooks=[_StopAfter()])
    said = [line for line in lines if "has not ended yet" in line]
    assert len(said) == 1 and "steps=N" in said[0], lines
    with pytest.raises(ValueError, match="repeats forever"):
        est.evaluate(lambda: tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(16))


def _adapted(kind):
    layers = keras.layers
    if kind == "StringLookup":
        layer, inputs = layers.StringLookup(), keras.Input((1,), dtype="string", name="words")
        layer.adapt(np.array(["cat", "dog", "bird"]))
    elif kind == "TextVectorization":
        layer = layers.TextVectorization(max_tokens=10, output_sequence_length=3)
        inputs = keras.Input((1,), dtype="string", name="text")
        layer.adapt(np.array(["the cat sat", "a dog ran"]))
    else:
        layer, inputs = layers.Discretization(num_bins=3), keras.Input((1,), name="x")
        layer.adapt(np.array([[0.1], [0.5], [0.9], [0.3]]))
    outputs = keras.layers.Dense(1)(tf2.cast(layer(inputs), "float32"))
    model = keras.Model(inputs, outputs)
    model.compile(keras.optimizers.legacy.Adam(0.01), "mse")
    return model


@pytest.mark.parametrize("kind", ["StringLookup", "TextVectorization", "Discretization"])
def test_adapted_preprocessing_layers_are_refused_with_the_argument_that_keeps_their_state(
    kind, tmp_path
):
    # Rebuilt from its config, the layer loses what adapt() found: lookups fail with "Table
    # not initialized" and Discretization silently puts every value in bin 0.
    argument = "bin_boundaries=" if kind == "Discretization" else "vocabulary="
    with pytest.raises(ValueError, match=rf"{kind} layer .* adapt\(\).*{kind}\({argument}"):
        to_estimator(_adapted(kind), model_dir=str(tmp_path))
    assert not list(tmp_path.iterdir())


def test_preprocessing_state_given_at_construction_is_carried_over(tmp_path):
    values = np.array([[-1.0], [0.2], [0.7], [3.0]], np.float32)
    words = np.array([["dog"], ["cat"], ["fish"], ["bird"]])
    numbers, text = keras.Input((1,), name="x"), keras.Input((1,), dtype="string", name="w")
    bins = keras.layers.Discretization(bin_boundaries=[0.0, 0.5, 1.0])(numbers)
    ids = keras.layers.StringLookup(vocabulary=["cat", "dog", "bird"])(text)
    merged = keras.layers.Concatenate()([tf2.cast(bins, "float32"), tf2.cast(ids, "float32")])
    model = keras.Model([numbers, text], keras.layers.Dense(1)(merged))
    model.compile(keras.optimizers.legacy.Adam(0.01), "mse")
    expected = model.predict({"x": values, "w": words}, verbose=0)
    est = to_estimator(model, model_dir=str(tmp_path))
    np.testing.assert_allclose(_predict(est, {"x": values, "w": words}), expected, atol=1e-6)


def test_conversion_and_training_say_no_keras_deprecation_warnings(tmp_path):
    # Keras warns about set_learning_phase and Model.state_updates from inside its own
    # converter and model_fn, on every call: nothing a user of to_estimator can act on.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = to_estimator(_sequential(), model_dir=str(tmp_path))
        est.train(lambda: tf.data.Dataset.from_tensor_slices((X, Y)).batch(16), steps=1)
    said = [str(w.message) for w in caught]
    assert not [m for m in said if "set_learning_phase" in m or "state_updates" in m], said


@pytest.mark.skipif(
    not importlib.util.find_spec("keras") or KERAS_PACKAGE == "keras",
    reason="`import keras` is Keras 2 on this stack",
)
def test_a_keras_3_model_is_refused_in_one_line_naming_keras_2():
    import keras  # Keras 3 beside tf-keras, as TensorFlow >= 2.16 installs it

    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    with pytest.raises(TypeError, match=r"Keras 3.*Keras 2.*tf\.keras.*import tfest_kit") as info:
        to_estimator(model)
    assert "\n" not in str(info.value)
