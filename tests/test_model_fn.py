"""model_fn builders: real Estimators on small synthetic data."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from tests.conftest import captured_tf_log
from tfest_kit import model_fn as mf
from tfest_kit import serving
from tfest_kit._tf import estimator, tf, tf2

NUM_CLASSES = 3
FEATURES = 4
RNG = np.random.RandomState(0)
TRUE_W = RNG.randn(FEATURES, NUM_CLASSES).astype(np.float32) * 2.0
X_TRAIN = RNG.randn(256, FEATURES).astype(np.float32)
Y_TRAIN = np.argmax(X_TRAIN @ TRUE_W, axis=1).astype(np.int64)
X_EVAL = RNG.randn(90, FEATURES).astype(np.float32)
Y_EVAL = np.argmax(X_EVAL @ TRUE_W, axis=1).astype(np.int64)


def network(features, mode, params):
    hidden = tf2.keras.layers.Dense(8, activation="tanh", name="hidden")(features["x"])
    return tf2.keras.layers.Dense(NUM_CLASSES, name="logits")(hidden)


def input_fn(x, y=None, *, batch_size=32, repeat=False, label_shape=None):
    def fn(params=None):
        labels = y if label_shape is None or y is None else y.reshape(label_shape)
        data = {"x": x} if y is None else ({"x": x}, labels)
        dataset = tf.data.Dataset.from_tensor_slices(data)
        if repeat:
            dataset = dataset.shuffle(256, seed=1).repeat()
        return dataset.batch(batch_size)

    return fn


def _predict(est, x=X_EVAL):
    outputs = list(est.predict(input_fn(x), yield_single_examples=False))
    return {key: np.concatenate([o[key] for o in outputs]) for key in outputs[0]}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A classifier trained 1 step (eval recorded), then 80 more steps."""
    model_dir = str(tmp_path_factory.mktemp("classifier"))
    est = estimator.Estimator(
        mf.classifier(
            network,
            NUM_CLASSES,
            learning_rate=0.05,
            metrics=("accuracy", "f1", "precision", "recall_at_2"),
        ),
        model_dir=model_dir,
    )
    train = input_fn(X_TRAIN, Y_TRAIN, repeat=True, label_shape=(-1, 1))
    est.train(train, max_steps=1)
    first = est.evaluate(input_fn(X_EVAL, Y_EVAL, batch_size=25))
    est.train(train, max_steps=81)
    return est, first, est.evaluate(input_fn(X_EVAL, Y_EVAL, batch_size=25))


def test_classifier_loss_goes_down_and_learns(trained):
    _, first, last = trained
    assert last["global_step"] == 81
    assert last["loss"] < 0.6 * first["loss"]
    assert last["accuracy"] > 0.8


def test_classifier_eval_metrics_match_numpy(trained):
    est, _, result = trained
    predicted = _predict(est)
    class_ids, logits = predicted["class_ids"], predicted["logits"]
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    per_example = -log_probs[np.arange(len(Y_EVAL)), Y_EVAL]
    # Estimator's "loss" is the mean of the per-batch mean losses (batches of 25, 25, 25, 15).
    expected_loss = np.mean([per_example[i : i + 25].mean() for i in range(0, len(Y_EVAL), 25)])
    top_2 = np.argsort(-logits, axis=1)[:, :2]
    expected = {
        "loss": expected_loss,
        "accuracy": skm.accuracy_score(Y_EVAL, class_ids),
        "f1": skm.f1_score(Y_EVAL, class_ids, average="macro", zero_division=0),
        "precision": skm.precision_score(Y_EVAL, class_ids, average="macro", zero_division=0),
        "recall_at_2": (top_2 == Y_EVAL[:, None]).any(axis=1).mean(),
    }
    for name, value in expected.items():
        np.testing.assert_allclose(result[name], value, rtol=1e-4, err_msg=name)


def test_classifier_predictions_have_documented_keys_and_shapes(trained):
    est, _, _ = trained
    predicted = _predict(est)
    n = len(X_EVAL)
    assert sorted(predicted) == sorted(["logits", "probabilities", "class_ids"])
    assert predicted["logits"].shape == (n, NUM_CLASSES)
    assert predicted["probabilities"].shape == (n, NUM_CLASSES)
    np.testing.assert_allclose(predicted["probabilities"].sum(axis=1), 1.0, rtol=1e-5)
    assert predicted["class_ids"].shape == (n,) and predicted["class_ids"].dtype == np.int64


def _examples(x):
    return [
        tf2.train.Example(
            features=tf2.train.Features(
                feature={"x": tf2.train.Feature(float_list=tf2.train.FloatList(value=row))}
            )
        ).SerializeToString()
        for row in x
    ]


def test_export_loads_and_answers(trained, tmp_path):
    est, _, _ = trained
    receiver = estimator.export.build_parsing_serving_input_receiver_fn(
        {"x": tf.io.FixedLenFeature([FEATURES], tf.float32)}
    )
    export_dir = est.export_saved_model(str(tmp_path), receiver).decode()
    loaded = tf2.saved_model.load(export_dir)
    assert {"serving_default", "predict", "classification"} <= set(loaded.signatures)
    examples = tf2.constant(_examples(X_EVAL[:5]))
    served = loaded.signatures["serving_default"](examples=examples)
    expected = _predict(est, X_EVAL[:5])
    assert set(served) == set(expected)
    np.testing.assert_allclose(served["probabilities"].numpy(), expected["probabilities"], 1e-5)
    classified = loaded.signatures["classification"](inputs=examples)
    np.testing.assert_allclose(classified["scores"].numpy(), expected["probabilities"], 1e-5)
    assert classified["classes"].numpy()[0].tolist() == [b"0", b"1", b"2"]


def test_warm_start_starts_from_saved_values(trained, tmp_path):
    est, _, _ = trained
    with captured_tf_log() as lines:
        model_fn = mf.classifier(network, NUM_CLASSES, init_checkpoint=est.model_dir)
        warm = estimator.Estimator(model_fn, model_dir=str(tmp_path / "warm"))
        # No checkpoint in the new model_dir: predict runs the (warm-start) initialisers.
        predicted = _predict(warm)
    np.testing.assert_allclose(predicted["logits"], _predict(est)["logits"], rtol=1e-5)
    init_lines = [line for line in lines if "*INIT_FROM_CKPT*" in line]
    assert any("name = hidden/kernel, shape = (4, 8)" in line for line in init_lines), lines
    assert len(init_lines) == 4  # two kernels, two biases; not the global step
    # Training from the warm start keeps the saved values as starting point.
    warm.train(input_fn(X_TRAIN, Y_TRAIN, repeat=True), max_steps=1)
    saved = tf.train.load_variable(est.model_dir, "hidden/kernel")
    new = tf.train.load_variable(warm.model_dir, "hidden/kernel")
    assert np.abs(new - saved).max() < 0.01


def test_regressor_with_adamw_schedule_learns_and_metrics_match(tmp_path):
    w = np.array([[1.5], [-2.0], [0.5], [0.0]], np.float32)
    y_train, y_eval = X_TRAIN @ w + 0.3, X_EVAL @ w + 0.3

    def linear(features, mode, params):
        return tf2.keras.layers.Dense(1, name="out")(features["x"])

    est = estimator.Estimator(
        mf.regressor(
            linear,
            optimizer="adamw",
            learning_rate=0.1,
            warmup_steps=10,
            decay_steps=200,
            metrics=("mse", "mae", "rmse"),
        ),
        model_dir=str(tmp_path),
    )
    est.train(input_fn(X_TRAIN, y_train[:, 0], repeat=True), max_steps=1)
    first = est.evaluate(input_fn(X_EVAL, y_eval))
    est.train(input_fn(X_TRAIN, y_train[:, 0], repeat=True), max_steps=150)
    result = est.evaluate(input_fn(X_EVAL, y_eval))
    assert result["loss"] < 0.1 * first["loss"]
    predicted = _predict(est)["predictions"]
    assert predicted.shape == (len(X_EVAL), 1)
    errors = predicted - y_eval
    np.testing.assert_allclose(result["mse"], (errors**2).mean(), rtol=1e-4)
    np.testing.assert_allclose(result["mae"], np.abs(errors).mean(), rtol=1e-4)
    np.testing.assert_allclose(result["rmse"], np.sqrt((errors**2).mean()), rtol=1e-4)


def test_learning_rate_schedule_values():
    with tf.Graph().as_default():
        step = tf.placeholder(tf.int64, [])
        lr = mf._learning_rate_schedule(1.0, step, 10, 100)
        constant = mf._learning_rate_schedule(0.5, step, 0, None)
        decay_only = mf._learning_rate_schedule(1.0, step, 0, 100)
        with tf.Session() as sess:
            got = [sess.run(lr, {step: s}) for s in (0, 5, 9, 10, 50, 100, 150)]
            np.testing.assert_allclose(got, [0.0, 0.5, 0.9, 0.9, 0.5, 0.0, 0.0], atol=1e-6)
            assert sess.run(constant, {step: 1000}) == pytest.approx(0.5)
            assert sess.run(decay_only, {step: 25}) == pytest.approx(0.75)


def _call(model_fn, mode, *, labels=True, params=None):
    features = {"x": tf.constant(X_EVAL[:8])}
    label_tensor = tf.constant(Y_EVAL[:8]) if labels else None
    return model_fn(features, label_tensor, mode, params)


@pytest.mark.parametrize("name", sorted(mf.OPTIMIZERS))
def test_every_optimizer_name_trains(name):
    with tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        spec = _call(
            mf.classifier(network, NUM_CLASSES, optimizer=name, learning_rate=0.1),
            estimator.ModeKeys.TRAIN,
        )
        with tf.train.MonitoredSession() as sess:
            losses = [sess.run([spec.train_op, spec.loss])[1] for _ in range(5)]
            step = sess.run(tf.train.get_global_step())
    assert losses[-1] < losses[0], (name, losses)
    assert step == 5, (name, step)  # one increment per step, neither none nor two


class _StepLeftAloneOptimizer(tf.train.GradientDescentOptimizer):
    """Takes `global_step` and leaves it alone, as BERT's AdamWeightDecayOptimizer does."""

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return super().apply_gradients(grads_and_vars, name=name)


class _StepReadingOptimizer(_StepLeftAloneOptimizer):
    """Reads the global step while applying gradients (a lazy rate), and leaves it alone."""

    def __init__(self, learning_rate):
        def rate():
            step = tf.cast(tf.train.get_global_step(), tf.float32)
            return learning_rate / (1.0 + step)

        super().__init__(rate)


def test_a_read_of_the_global_step_is_not_taken_for_its_increment():
    with tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        spec = _call(
            mf.classifier(network, NUM_CLASSES, optimizer=_StepReadingOptimizer),
            estimator.ModeKeys.TRAIN,
        )
        with tf.train.MonitoredSession() as sess:
            for _ in range(3):
                sess.run(spec.train_op)
            assert sess.run(tf.train.get_global_step()) == 3


def test_an_optimizer_that_leaves_the_global_step_alone_still_counts_steps(tmp_path):
    # BERT's create_optimizer adds the increment its optimizer leaves out: without it the step
    # stayed at 0, the warm-up never started, and max_steps was never reached.
    est = estimator.Estimator(
        mf.classifier(
            network, NUM_CLASSES, optimizer=_StepLeftAloneOptimizer, warmup_steps=2, decay_steps=50
        ),
        model_dir=str(tmp_path),
    )
    est.train(input_fn(X_TRAIN, Y_TRAIN), max_steps=50)  # 8 batches, then the data ends
    assert est.get_variable_value("global_step") == 8


def test_regularization_losses_are_in_the_loss():
    # Official heads add REGULARIZATION_LOSSES to the loss; the builders dropped them.
    built = []

    def regularized(features, mode, params):
        hidden = tf.layers.dense(
            features["x"],
            5,
            kernel_initializer=tf.ones_initializer(),
            kernel_regularizer=lambda w: 0.5 * tf.reduce_sum(w),  # 0.5 * 20 ones = 10
        )
        logits = tf.layers.dense(
            hidden,
            NUM_CLASSES,
            kernel_initializer=tf.ones_initializer(),
            kernel_regularizer=lambda w: 2.0 * tf.reduce_sum(w),  # 2 * 15 ones = 30
        )
        built.append(logits)
        return logits

    for mode in (estimator.ModeKeys.TRAIN, estimator.ModeKeys.EVAL):
        with tf.Graph().as_default():
            tf.train.get_or_create_global_step()
            spec = _call(mf.classifier(regularized, NUM_CLASSES), mode)
            with tf.train.MonitoredSession() as sess:
                loss, logits = sess.run([spec.loss, built[-1]])
        log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        cross_entropy = -log_probs[np.arange(8), Y_EVAL[:8]].mean()
        assert loss == pytest.approx(cross_entropy + 40.0, rel=1e-5), mode


def test_tpu_spec_returns_tpu_estimator_spec(trained):
    est, _, _ = trained
    model_fn = mf.classifier(network, NUM_CLASSES, tpu_spec=True, init_checkpoint=est.model_dir)
    params = {"batch_size": 8, "use_tpu": False}
    for mode in (estimator.ModeKeys.TRAIN, estimator.ModeKeys.EVAL, estimator.ModeKeys.PREDICT):
        with tf.Graph().as_default():
            tf.train.get_or_create_global_step()
            spec = _call(model_fn, mode, params=params)
            assert isinstance(spec, estimator.tpu.TPUEstimatorSpec)
            assert callable(spec.scaffold_fn)
            # The classification output tiles the class names over the batch.
            strings = [
                op.name
                for op in tf.get_default_graph().get_operations()
                if op.type == "Tile" and op.outputs[0].dtype == tf.string
            ]
            if mode == estimator.ModeKeys.PREDICT:
                assert {"serving_default", "predict", "classification"} <= set(spec.export_outputs)
                assert strings
            else:
                # Export outputs (class names: string ops) would land in the TPU computation,
                # which has no string kernels; only an export reads them.
                assert spec.export_outputs is None and not strings, strings
            if mode == estimator.ModeKeys.EVAL:
                metric_fn, tensors = spec.eval_metrics
                assert isinstance(tensors, dict) and set(tensors) == {"labels", "outputs"}
                assert set(metric_fn(**tensors)) == {"accuracy", "f1", "average_loss"}
            if mode == estimator.ModeKeys.TRAIN:
                assert spec.train_op is not None
            assert isinstance(spec.scaffold_fn(), tf.train.Scaffold)


def test_weight_key_weights_metrics():
    with tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        features = {"x": tf.constant(X_EVAL[:8]), "w": tf.constant(np.arange(8.0))}
        model_fn = mf.classifier(network, NUM_CLASSES, weight_key="w", metrics=("accuracy",))
        spec = model_fn(features, tf.constant(Y_EVAL[:8]), estimator.ModeKeys.EVAL, {})
        value, update = spec.eval_metric_ops["accuracy"]
        with tf.train.MonitoredSession() as sess:
            sess.run(update)
            class_ids, accuracy = sess.run([spec.predictions["class_ids"], value])
    expected = np.average(class_ids == Y_EVAL[:8], weights=np.arange(8.0))
    assert accuracy == pytest.approx(expected)


def test_weighted_evaluation_reports_the_weighted_mean_loss(trained):
    # Estimator's "loss" averages per-batch losses reduced by the number of non-zero weights:
    # weights x 10 gave a loss x 10 for the same model and data.
    est, _, _ = trained
    logits = _predict(est)["logits"]
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    per_example = -log_probs[np.arange(len(Y_EVAL)), Y_EVAL]
    weights = np.random.RandomState(1).uniform(0.0, 2.0, size=len(Y_EVAL)).astype(np.float32)
    expected = np.average(per_example, weights=weights)
    for scale in (1.0, 10.0):
        weighted = estimator.Estimator(
            mf.classifier(network, NUM_CLASSES, weight_key="w"), est.model_dir
        )

        def eval_fn(params=None, scale=scale):
            features = {"x": X_EVAL, "w": weights * scale}
            return tf.data.Dataset.from_tensor_slices((features, Y_EVAL)).batch(25)

        result = weighted.evaluate(eval_fn)
        assert result["average_loss"] == pytest.approx(expected, rel=1e-5)
    # Unweighted, it is the mean over examples: "loss" counts the last batch of 15 as one of 25.
    unweighted = est.evaluate(input_fn(X_EVAL, Y_EVAL, batch_size=25))
    assert unweighted["average_loss"] == pytest.approx(per_example.mean(), rel=1e-5)
    assert unweighted["loss"] != pytest.approx(per_example.mean(), rel=1e-4)


def test_weighted_regressor_average_loss_is_the_weighted_mse():
    with tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        w = np.arange(8.0, dtype=np.float32)
        features = {"x": tf.constant(X_EVAL[:8]), "w": tf.constant(w)}
        labels = X_EVAL[:8, :2].sum(axis=1, keepdims=True)

        def linear(features, mode, params):
            return tf2.keras.layers.Dense(1, name="out")(features["x"])

        model_fn = mf.regressor(linear, weight_key="w", metrics=("mse",))
        spec = model_fn(features, tf.constant(labels), estimator.ModeKeys.EVAL, {})
        updates = [update for _, update in spec.eval_metric_ops.values()]
        with tf.train.MonitoredSession() as sess:
            sess.run(updates)
            outputs, average, mse = sess.run(
                [
                    spec.predictions["predictions"],
                    spec.eval_metric_ops["average_loss"][0],
                    spec.eval_metric_ops["mse"][0],
                ]
            )
    expected = np.average(((outputs - labels) ** 2)[:, 0], weights=w)
    assert average == pytest.approx(expected, rel=1e-5) and mse == pytest.approx(expected)


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_classes": 1}, "`num_classes`.*Got: 1"),
        ({"optimizer": "adamax"}, r"`optimizer`.*'adam'.*Got: 'adamax'"),
        ({"metrics": ("accuracy", "f2")}, r"`metrics`.*'accuracy'.*'f1'.*Got: 'f2'"),
        ({"metrics": ("auc",)}, r"`metrics`.*\(auc: 2 classes only\). Got: 'auc'"),
        ({"metrics": ("recall_at_0",)}, r"`metrics`.*Got: 'recall_at_0'"),  # was always 0.0
        ({"metrics": ("recall_at_9",)}, r"\['recall_at_9'\] needs k <= num_classes"),  # TopKV2
        ({"warmup_steps": -1}, "`warmup_steps`"),
        (
            {"optimizer": tf.train.GradientDescentOptimizer(0.1), "warmup_steps": 5},
            "`warmup_steps`.*Optimizer instance",
        ),
        # The instance trains at 0.1: the 0.5 was ignored, and logged as the rate.
        (
            {"optimizer": tf.train.GradientDescentOptimizer(0.1), "learning_rate": 0.5},
            r"`learning_rate`.*own rate",
        ),
    ],
)
def test_bad_builder_arguments_raise_at_once(kwargs, match):
    kwargs = {"num_classes": NUM_CLASSES, **kwargs}
    with pytest.raises(ValueError, match=match):
        mf.classifier(network, **kwargs)


def test_a_network_fn_returning_a_dict_is_named():
    # tf.cast said "Expected any non-tensor type, but got a tensor instead."
    model_fn = mf.classifier(lambda f, mode, params: {"logits": network(f, mode, params)}, 3)
    with tf.Graph().as_default(), pytest.raises(TypeError, match="must return one tensor.*dict"):
        tf.train.get_or_create_global_step()
        _call(model_fn, estimator.ModeKeys.PREDICT)


def test_regressor_metrics_name_what_a_regressor_has():
    with pytest.raises(ValueError, match=r"`metrics` must be among \['mse'"):
        mf.regressor(network, metrics=("auc",))


@pytest.mark.parametrize("labels", [["a", "b"], [0.0, 1.0]])
def test_labels_of_another_dtype_are_named_with_the_fix(labels):
    with tf.Graph().as_default(), pytest.raises(ValueError, match=r"`labels`.*input_fn.*dtype"):
        features = {"x": tf.constant(X_EVAL[:2])}
        mf.classifier(network, NUM_CLASSES)(features, tf.constant(labels), "train", {})


def test_sparse_labels_or_a_missing_weight_feature_are_named():
    # A VarLenFeature label: 46 lines of "Failed to convert elements of SparseTensor"; a
    # weight_key not among the features: "KeyError: 'w'".
    sparse = tf.SparseTensor([[0, 0], [1, 0]], [0, 1], [2, 1])
    with tf.Graph().as_default(), pytest.raises(ValueError, match=r"not sparse.*FixedLenFeature"):
        mf.classifier(network, NUM_CLASSES)({"x": tf.constant(X_EVAL[:2])}, sparse, "train", {})
    model_fn = mf.regressor(lambda f, mode, params: tf.layers.dense(f["x"], 1), weight_key="w")
    with tf.Graph().as_default(), pytest.raises(ValueError, match=r"`weight_key` 'w'.*\['x'\]"):
        model_fn({"x": tf.constant(X_EVAL[:2])}, tf.constant([[1.0], [2.0]]), "train", {})


def test_features_given_as_one_tensor_to_a_network_that_names_them_are_named():
    with tf.Graph().as_default(), pytest.raises(ValueError, match=r"one tensor, not a dict"):
        mf.classifier(network, NUM_CLASSES)(
            tf.constant(X_EVAL[:2]), tf.constant([0, 1]), "train", {}
        )


def test_training_without_labels_says_the_input_fn_must_return_them():
    with tf.Graph().as_default(), pytest.raises(ValueError, match=r"train needs labels: the inp"):
        mf.classifier(network, NUM_CLASSES)({"x": tf.constant(X_EVAL[:2])}, None, "train", {})


@pytest.mark.parametrize("num_classes, width", [(2, 3), (3, 2)])
def test_logits_of_another_width_than_num_classes_are_named(num_classes, width):
    # For 2 classes the head's error named the shape it sliced them to, "got (None, 2)".
    def wide(features, mode, params):
        return tf.layers.dense(features["x"], width)

    with tf.Graph().as_default(), pytest.raises(ValueError) as raised:
        features = {"x": tf.constant(X_EVAL[:2])}
        mf.classifier(wide, num_classes)(features, tf.constant([0, 1]), "train", {})
    message = str(raised.value)
    assert f"network_fn must return logits [batch, {num_classes}]" in message, message
    assert f"(2, {width})" in message, message


def test_features_batched_twice_are_named_in_training_and_in_an_export(tmp_path, trained):
    est = estimator.Estimator(mf.classifier(network, NUM_CLASSES), str(tmp_path / "twice"))
    once = input_fn(X_TRAIN, Y_TRAIN)
    with pytest.raises(ValueError, match=r"Got: shape \(None, None, 3\) \(batched twice\?"):
        est.train(lambda: once().batch(2), max_steps=1)
    # A receiver given the batch dimension: the model sees rank-3 features when exported.
    receiver = serving.raw_receiver({"x": (tf.float32, [None, FEATURES])})
    with pytest.raises(ValueError, match="a receiver shape with the batch dimension"):
        trained[0].export_saved_model(str(tmp_path / "export"), receiver)
    assert not (tmp_path / "twice").exists() or not list((tmp_path / "twice").glob("*.index"))


def test_a_bool_mask_is_taken_as_weights():
    model_fn = mf.classifier(network, NUM_CLASSES, weight_key="w")
    with tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        mask = {"x": tf.constant(X_EVAL[:2]), "w": tf.constant([True, False])}
        spec = model_fn(mask, tf.constant(Y_EVAL[:2]), "eval", {})
        with tf.train.MonitoredSession() as sess:
            sess.run(spec.eval_metric_ops["average_loss"][1])
            average, logits = sess.run(
                [spec.eval_metric_ops["average_loss"][0], spec.predictions["logits"]]
            )
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    assert average == pytest.approx(-log_probs[0, Y_EVAL[0]], rel=1e-5)  # the first one only


def _first_graph_build(model_fn, model_dir=None):
    """Calls ``model_fn`` in a new graph as Estimator would (TRAIN, with a config)."""
    with tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        features, labels = {"x": tf.constant(X_EVAL[:8])}, tf.constant(Y_EVAL[:8])
        config = estimator.RunConfig(model_dir=model_dir) if model_dir else None
        return model_fn(features, labels, estimator.ModeKeys.TRAIN, {}, config)


def test_unreadable_checkpoints_raise_at_the_first_graph_build(tmp_path):
    model_dir = str(tmp_path / "fresh")
    empty, broken = tmp_path / "empty", tmp_path / "broken"
    empty.mkdir()
    broken.mkdir()
    (broken / "model.ckpt-1.index").write_bytes(b"not a checkpoint")
    for init_checkpoint, match in (
        ("/no/such/model.ckpt-1", "`init_checkpoint` does not exist"),
        (str(empty), "directory without a checkpoint"),
        (str(broken / "model.ckpt-1"), "could not be read"),
    ):
        model_fn = mf.classifier(network, NUM_CLASSES, init_checkpoint=init_checkpoint)
        with pytest.raises(ValueError, match=match):
            _first_graph_build(model_fn, model_dir)
    with pytest.raises(ValueError, match="`metrics`.*'mse'.*Got: 'accuracy'"):
        mf.regressor(network, metrics=("accuracy",))


def test_init_checkpoint_is_not_needed_to_resume_from_model_dir(trained, tmp_path):
    # The source was read again at every graph build and checked when the builder ran: once
    # deleted (or rotated away by a pretraining job's keep_checkpoint_max), evaluate() failed
    # with NotFoundError and a restarted job could not resume. warm_start_from skips it too.
    est, _, _ = trained
    source = tmp_path / "pretrained"
    prefix = tf.train.latest_checkpoint(est.model_dir)
    source.mkdir()
    for path in tf.io.gfile.glob(prefix + ".*"):
        tf.io.gfile.copy(path, str(source / path.rsplit("/", 1)[1]))
    init_checkpoint = str(source / prefix.rsplit("/", 1)[1])
    model_dir = str(tmp_path / "fine_tuned")
    train = input_fn(X_TRAIN, Y_TRAIN, repeat=True)
    fine_tuned = estimator.Estimator(
        mf.classifier(network, NUM_CLASSES, init_checkpoint=init_checkpoint), model_dir
    )
    fine_tuned.train(train, max_steps=2)
    for path in source.iterdir():
        path.unlink()
    with captured_tf_log() as lines:
        assert fine_tuned.evaluate(input_fn(X_EVAL, Y_EVAL))["global_step"] == 2
        restarted = estimator.Estimator(
            mf.classifier(network, NUM_CLASSES, init_checkpoint=init_checkpoint), model_dir
        )
        restarted.train(train, max_steps=4)
    assert restarted.evaluate(input_fn(X_EVAL, Y_EVAL))["global_step"] == 4
    assert sum(line.startswith("Resuming from ") for line in lines) == 1
    assert not any("*INIT_FROM_CKPT*" in line for line in lines)
    # With no checkpoint of its own to resume from, the missing source is an error.
    with pytest.raises(ValueError, match="`init_checkpoint` does not exist"):
        estimator.Estimator(
            mf.classifier(network, NUM_CLASSES, init_checkpoint=init_checkpoint),
            str(tmp_path / "new"),
        ).train(train, max_steps=1)


def test_only_a_missing_feature_is_blamed_on_the_input(tmp_path):
    def needs_mask(features, mode, params):
        return network({"x": features["x"] * features["mask"]}, mode, params)

    def optional_mask(features, mode, params):
        try:
            mask = features["mask"]
        except KeyError:  # an optional feature: the network's own KeyError handling still works
            mask = 1.0
        return network({"x": features["x"] * mask}, mode, params)

    def needs_param(features, mode, params):
        hidden = tf2.keras.layers.Dense(params["hidden_units"])(features["x"])
        return tf2.keras.layers.Dense(NUM_CLASSES)(hidden)

    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"looked up feature 'mask'.*Got features: \['x'\]"):
            _call(mf.classifier(needs_mask, NUM_CLASSES), estimator.ModeKeys.PREDICT)
        spec = _call(mf.classifier(optional_mask, NUM_CLASSES), estimator.ModeKeys.PREDICT)
        assert spec.predictions["logits"].shape.as_list() == [8, NUM_CLASSES]
    # A params key the network expects is the caller's to give: the KeyError is left as it is.
    est = estimator.Estimator(mf.classifier(needs_param, NUM_CLASSES), model_dir=str(tmp_path))
    with pytest.raises(KeyError, match="hidden_units") as raised:
        est.train(input_fn(X_TRAIN, Y_TRAIN), max_steps=1)
    assert type(raised.value) is KeyError
    est = estimator.Estimator(
        mf.classifier(needs_param, NUM_CLASSES), model_dir=str(tmp_path), params={"hidden_units": 4}
    )
    est.train(input_fn(X_TRAIN, Y_TRAIN), max_steps=2)
    assert est.get_variable_value("global_step") == 2


def test_tpu_spec_runs_under_the_official_tpu_estimator_on_cpu(tmp_path):
    def tpu_input_fn(x, y):
        def fn(params):
            data = tf.data.Dataset.from_tensor_slices(({"x": x}, y.astype(np.int32)))
            return data.repeat().batch(params["batch_size"], drop_remainder=True)

        return fn

    est = estimator.tpu.TPUEstimator(
        mf.classifier(
            network,
            NUM_CLASSES,
            tpu_spec=True,
            learning_rate=0.05,
            warmup_steps=2,
            decay_steps=20,
            metrics=("accuracy", "f1"),
        ),
        model_dir=str(tmp_path),
        use_tpu=False,
        train_batch_size=32,
        eval_batch_size=30,
        config=estimator.tpu.RunConfig(tpu_config=estimator.tpu.TPUConfig(iterations_per_loop=10)),
    )
    est.train(tpu_input_fn(X_TRAIN, Y_TRAIN), max_steps=20)
    result = est.evaluate(tpu_input_fn(X_EVAL, Y_EVAL), steps=3)
    assert {"loss", "accuracy", "f1"} <= set(result)
    assert result["global_step"] == 20


def test_binary_auc_and_float_labels():
    def binary(features, mode, params):
        return tf2.keras.layers.Dense(2)(features["x"])

    with tf.Graph().as_default():
        model_fn = mf.classifier(binary, 2, metrics=("auc", "accuracy"))
        spec = model_fn(
            {"x": tf.constant(X_EVAL[:8])}, tf.constant(Y_EVAL[:8] % 2), estimator.ModeKeys.EVAL
        )
        # The official BinaryClassHead's metrics, "auc" among them.
        assert {"auc", "accuracy", "average_loss", "label/mean"} <= set(spec.eval_metric_ops)
        with pytest.raises(ValueError, match="`labels` must be integer.*float32"):
            model_fn({"x": tf.constant(X_EVAL[:8])}, tf.zeros([8]), estimator.ModeKeys.EVAL)


# ------------------------------------------------------------------------ warm start details


def test_warm_start_lists_once_across_builds_and_skips_other_shapes(trained):
    est, _, _ = trained

    def wider(features, mode, params):
        hidden = tf2.keras.layers.Dense(8, activation="tanh", name="hidden")(features["x"])
        return tf2.keras.layers.Dense(NUM_CLASSES + 1, name="logits")(hidden)

    model_fn = mf.classifier(wider, NUM_CLASSES + 1, init_checkpoint=est.model_dir)
    with captured_tf_log() as lines:
        # Estimator builds the graph again for train, evaluate, predict and export.
        for mode in (estimator.ModeKeys.TRAIN, estimator.ModeKeys.EVAL, estimator.ModeKeys.PREDICT):
            with tf.Graph().as_default():
                tf.train.get_or_create_global_step()
                _call(model_fn, mode)
    assert sum("**** Variables" in line for line in lines) == 1, lines
    assert sum("*INIT_FROM_CKPT*" in line for line in lines) == 2, lines
    # Said as a warning, once: before, only the INFO listing told (logits/* not marked).
    [said] = [line for line in lines if line.startswith("Warm start: ")]
    assert "['logits/kernel', 'logits/bias'] differ in shape or dtype" in said, said


def test_init_checkpoint_names_a_checkpoint_by_one_of_its_files_or_exports(trained, tmp_path):
    # "model.ckpt-N.index" was read as nothing: "holds none of this model's variables"; an
    # exporter's base (model_dir/export/best) was "a directory without a checkpoint".
    est, _, _ = trained
    receiver = serving.raw_receiver({"x": (tf.float32, [FEATURES])})
    est.export_saved_model(str(tmp_path / "best"), receiver)
    paths = [est.latest_checkpoint() + ".index", est.latest_checkpoint() + ".data-00000-of-00001"]
    for path in [*paths, str(tmp_path / "best")]:
        model_fn = mf.classifier(network, NUM_CLASSES, init_checkpoint=path)
        with tf.Graph().as_default():
            tf.train.get_or_create_global_step()
            _call(model_fn, estimator.ModeKeys.PREDICT)
            kernel = next(v for v in tf.global_variables() if v.op.name == "hidden/kernel")
            with tf.train.MonitoredSession() as sess:
                warm = sess.run(kernel)
        np.testing.assert_array_equal(warm, tf.train.load_variable(est.model_dir, "hidden/kernel"))


def test_tpu_spec_scaffold_does_not_warm_start_optimizer_slots(trained):
    est, _, _ = trained
    saved_slot = tf.train.load_variable(est.model_dir, "hidden/kernel/Adam")
    assert np.abs(saved_slot).max() > 0
    model_fn = mf.classifier(network, NUM_CLASSES, tpu_spec=True, init_checkpoint=est.model_dir)
    with tf.Graph().as_default(), captured_tf_log() as lines:
        tf.train.get_or_create_global_step()
        spec = _call(model_fn, estimator.ModeKeys.TRAIN, params={"batch_size": 8})
        spec.scaffold_fn()  # after the train op, as TPUEstimator calls it
        by_name = {v.op.name: v for v in tf.global_variables()}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            kernel, slot = sess.run([by_name["hidden/kernel"], by_name["hidden/kernel/Adam"]])
    np.testing.assert_array_equal(kernel, tf.train.load_variable(est.model_dir, "hidden/kernel"))
    np.testing.assert_array_equal(slot, np.zeros_like(saved_slot))
    assert not any("/Adam" in line for line in lines)


def test_labels_out_of_range_fail_naming_num_classes_and_the_value():
    model_fn = mf.classifier(network, NUM_CLASSES, metrics=("accuracy", "f1", "recall_at_2"))
    for mode in (estimator.ModeKeys.EVAL, estimator.ModeKeys.TRAIN):
        with tf.Graph().as_default():
            tf.train.get_or_create_global_step()
            labels = tf.constant([0, 1, 2, 5, 1], tf.int64)
            spec = model_fn({"x": tf.constant(X_EVAL[:5])}, labels, mode, {})
            fetches = [spec.loss, spec.train_op] if spec.train_op is not None else [spec.loss]
            fetches += [update for _, update in spec.eval_metric_ops.values()]
            with (
                tf.train.MonitoredSession() as sess,
                pytest.raises(
                    tf.errors.InvalidArgumentError,
                    match=r"`labels` must be class ids in \[0, num_classes=3\).*\[0\] \[to\] \[5\]",
                ),
            ):
                sess.run(fetches)


def test_labels_out_of_range_in_training_and_evaluation_are_one_short_value_error(tmp_path):
    # TensorFlow said "InvalidArgumentError: Graph execution error" and ~40 lines of op stack.
    import tfest_kit
    from tfest_kit import tpu

    bad = Y_TRAIN.copy()
    bad[7] = 5
    config = tpu.RunConfig(model_dir=str(tmp_path / "tpu"), log_step_count_steps=None)
    est = tpu.TPUEstimator(
        mf.classifier(network, NUM_CLASSES), config=config, use_tpu=False, eval_batch_size=16
    )
    message = r"`labels`.*num_classes=3.*0 to 5"
    with pytest.raises(ValueError, match=message) as raised:
        est.train(input_fn(X_TRAIN, bad, repeat=False), max_steps=2)
    assert "Graph execution error" not in str(raised.value)
    assert "input_fn" in str(raised.value)
    with pytest.raises(ValueError, match=message):
        est.evaluate(lambda params: input_fn(X_TRAIN, bad)(params))
    plain = estimator.Estimator(mf.classifier(network, NUM_CLASSES), str(tmp_path / "plain"))
    with pytest.raises(ValueError, match=message):
        tfest_kit.train_and_evaluate(
            plain, input_fn(X_TRAIN, bad, repeat=True), input_fn(X_EVAL, Y_EVAL), max_steps=9
        )


def _warm_started_kernel(init_checkpoint):
    """The value ``hidden/kernel`` starts from when warm-started from ``init_checkpoint``."""
    model_fn = mf.classifier(network, NUM_CLASSES, init_checkpoint=init_checkpoint)
    with tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        _call(model_fn, estimator.ModeKeys.PREDICT)
        kernel = next(v for v in tf.global_variables() if v.op.name == "hidden/kernel")
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return sess.run(kernel)


def test_keras_layers_initial_weights_follow_tf_random_seed(tmp_path):
    # Keras >= 2.10 seeds an unseeded initializer from Python's random when it is created,
    # not from the graph seed tf_random_seed sets: every run started from other weights.
    def initial_logits(seed, name):
        est = estimator.Estimator(
            mf.classifier(network, NUM_CLASSES),
            model_dir=str(tmp_path / name),
            config=estimator.RunConfig(tf_random_seed=seed),
        )
        return _predict(est)["logits"]

    first, again, other = initial_logits(5, "a"), initial_logits(5, "b"), initial_logits(6, "c")
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)


def test_seeded_gives_a_hand_written_model_fn_the_same_start(tmp_path):
    def users_model_fn(features, labels, mode):  # no params, no config
        logits = network(features, mode, None)
        if mode == estimator.ModeKeys.PREDICT:
            return estimator.EstimatorSpec(mode, predictions={"logits": logits})
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def make(seed, name, params=None):
        return estimator.Estimator(
            mf.seeded(users_model_fn),
            model_dir=str(tmp_path / name),
            config=estimator.RunConfig(tf_random_seed=seed),
            params=params,
        )

    first, again, other = (
        _predict(make(s, n))["logits"] for s, n in ((5, "a"), (5, "b"), (6, "c"))
    )
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)
    # Trains as the model_fn does unwrapped, and keeps Estimator's own checks.
    make(5, "d").train(input_fn(X_TRAIN, Y_TRAIN, repeat=True), max_steps=2)
    assert tf.train.latest_checkpoint(str(tmp_path / "d")).endswith("-2")
    with pytest.raises(ValueError, match="does not take params"):
        _predict(make(5, "e", params={"units": 3}))


def test_seeded_refuses_labels_the_model_fn_does_not_take(tmp_path):
    def no_labels(features, mode):
        raise AssertionError("never called")

    est = estimator.Estimator(mf.seeded(no_labels), model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="does not take labels"):
        est.train(input_fn(X_TRAIN, Y_TRAIN), max_steps=1)
    with pytest.raises(ValueError, match="must take a `features` argument"):
        mf.seeded(lambda inputs, labels: None)
    with pytest.raises(ValueError, match="must be a callable"):
        mf.seeded("model_fn")


def test_keras_batch_normalization_moving_averages_are_updated(tmp_path):
    # Keras keeps a BatchNormalization layer's updates out of UPDATE_OPS: before, nothing ran
    # them in a model_fn, and evaluation normalised with mean 0 / variance 1 for good.
    def bn_network(features, mode, params):
        training = mode == estimator.ModeKeys.TRAIN
        x = features["x"]
        keras_bn = tf2.keras.layers.BatchNormalization(name="keras_bn")(x, training=training)
        v1_bn = tf.layers.batch_normalization(x, training=training, name="v1_bn")  # UPDATE_OPS
        return tf2.keras.layers.Dense(NUM_CLASSES, name="logits")(tf.concat([keras_bn, v1_bn], 1))

    est = estimator.Estimator(mf.classifier(bn_network, NUM_CLASSES), model_dir=str(tmp_path))
    est.train(input_fn(X_TRAIN + 5.0, Y_TRAIN, repeat=True), max_steps=60)
    # momentum 0.99: after 60 steps about 45 % of the way from 0 to the data's mean of 5.
    for name in ("keras_bn/moving_mean", "v1_bn/moving_mean"):
        moved = est.get_variable_value(name)
        assert np.all(moved > 1.5) and np.all(moved < 3.5), (name, moved)


def test_warm_start_skips_a_variable_saved_with_another_dtype(tmp_path):
    # Matched by name and shape, a float16 checkpoint variable failed at session start with
    # "expected dtype float does not equal original dtype half".
    prefix = str(tmp_path / "half" / "model.ckpt")
    with tf.Graph().as_default():
        tf.get_variable("hidden/kernel", [FEATURES, 8], tf.float16)
        bias = tf.get_variable("hidden/bias", [8], initializer=tf.constant_initializer(0.5))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            tf.train.Saver().save(sess, prefix)
    model_fn = mf.classifier(network, NUM_CLASSES, init_checkpoint=prefix)
    with captured_tf_log() as lines, tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        _call(model_fn, estimator.ModeKeys.PREDICT)
        bias = next(v for v in tf.global_variables() if v.op.name == "hidden/bias")
        with tf.train.MonitoredSession() as sess:
            np.testing.assert_array_equal(sess.run(bias), np.full(8, 0.5, np.float32))
    assert [line for line in lines if "*INIT_FROM_CKPT*" in line] == [
        "  name = hidden/bias, shape = (8,), *INIT_FROM_CKPT*"
    ], lines


def test_build_takes_an_official_head_and_adds_metric_fn():
    def total(labels, outputs, weights):
        return {"total": tf.metrics.mean(tf.reduce_sum(outputs))}

    model_fn = mf.build(network, head=estimator.MultiLabelHead(NUM_CLASSES), metric_fn=total)
    with tf.Graph().as_default():
        labels = tf.constant(np.eye(NUM_CLASSES, dtype=np.int64)[Y_EVAL[:8]])
        spec = model_fn({"x": tf.constant(X_EVAL[:8])}, labels, estimator.ModeKeys.EVAL)
        assert {"average_loss", "auc", "total"} <= set(spec.eval_metric_ops)
    with tf.Graph().as_default():
        spec = model_fn({"x": tf.constant(X_EVAL[:8])}, None, estimator.ModeKeys.PREDICT)
        assert {"serving_default", "predict", "classification"} <= set(spec.export_outputs)
        assert "probabilities" in spec.predictions
    with pytest.raises(TypeError, match=r"`head`.*tf\.estimator\.Head"):
        mf.build(network, lambda labels, logits: 0.0)
