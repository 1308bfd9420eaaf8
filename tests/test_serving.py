"""Receivers, exporters and Predictor on real exported Estimators (tiny models, CPU)."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import tempfile

import numpy as np
import pytest

from tests.conftest import captured_tf_log
from tfest_kit import serving
from tfest_kit._tf import estimator, tf, tf2

IMAGE = 8


def _network(features, params):
    kind = params["kind"]
    if kind == "x":
        net = features["x"]
    elif kind == "bert":
        ids = tf.cast(features["input_ids"], tf.float32) / 100.0
        net = tf.concat(
            [ids, tf.cast(features["input_mask"] + features["segment_ids"], tf.float32)], 1
        )
    else:
        net = tf.reduce_mean(features["image"], axis=[1, 2])
    logits = tf.layers.dense(net, 2, name="logits")
    if params.get("noise"):
        # A random op in the PREDICT graph: two runs never agree (used to provoke a mismatch).
        logits += tf.random.normal(tf.shape(logits))
    return logits


def _model_fn(features, labels, mode, params):
    logits = _network(features, params)
    predictions = {
        "logits": logits,
        "probabilities": tf.nn.softmax(logits),
        "class_ids": tf.argmax(logits, 1),
    }
    if mode == estimator.ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.AdamOptimizer(params.get("learning_rate", 0.05)).minimize(
        loss, tf.train.get_global_step()
    )
    metrics = {"accuracy": tf.metrics.accuracy(labels, predictions["class_ids"])}
    return estimator.EstimatorSpec(
        mode, loss=loss, train_op=train_op, predictions=predictions, eval_metric_ops=metrics
    )


RNG = np.random.RandomState(0)
X = RNG.randn(64, 4).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)
BERT = {
    "input_ids": RNG.randint(0, 100, (32, 6)).astype(np.int32),
    "input_mask": np.ones((32, 6), np.int32),
    "segment_ids": np.zeros((32, 6), np.int32),
}
IMAGES = RNG.randint(0, 256, (16, IMAGE, IMAGE, 3)).astype(np.uint8)


def _train(model_dir, features, labels, kind, steps=10, **params):
    est = estimator.Estimator(
        _model_fn,
        model_dir=model_dir,
        params={"kind": kind, **params},
        # No graph seed with noise: a fixed seed would make the random op repeat itself.
        config=estimator.RunConfig(
            tf_random_seed=None if params.get("noise") else 0, save_summary_steps=1000
        ),
    )
    est.train(
        lambda: tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(16),
        steps=steps,
    )
    return est


def _predict(est, features):
    rows = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices(features).batch(64)))
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


@pytest.fixture(scope="module")
def x_model(tmp_path_factory):
    return _train(str(tmp_path_factory.mktemp("x") / "model"), {"x": X}, Y, "x")


@pytest.fixture(scope="module")
def x_export(x_model, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("x_export"))
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    return x_model.export_saved_model(base, receiver).decode()


@pytest.mark.parametrize(
    "spec", [{"x": (tf.float32, [4])}, {"x": ("float32", 4)}], ids=["dtype_shape", "name_int"]
)
def test_raw_receiver_serves_what_estimator_predicts(x_model, tmp_path, spec):
    receiver = serving.raw_receiver(spec)
    path = serving.export_and_check(x_model, receiver, {"x": X[:8]}, str(tmp_path))
    predictor = serving.Predictor(path)
    assert predictor.inputs["x"].shape.as_list() == [None, 4]
    got = predictor({"x": X})
    want = _predict(x_model, {"x": X})
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["class_ids"], want["class_ids"])


def test_predictor_takes_the_bytes_path_export_saved_model_returns(x_model, tmp_path):
    path = x_model.export_saved_model(str(tmp_path), serving.raw_receiver({"x": (tf.float32, [4])}))
    assert isinstance(path, bytes)
    with serving.Predictor(path) as predictor:
        assert predictor.export_dir == path.decode()
        np.testing.assert_array_equal(
            predictor({"x": X})["class_ids"], _predict(x_model, {"x": X})["class_ids"]
        )
    with pytest.raises(RuntimeError, match=r"Predictor\(.*\) was closed"):  # "Session has been"
        predictor({"x": X})
    assert serving.read_signatures(path)[0] == path.decode()


def test_parsing_receiver_accepts_plain_features(x_model, tmp_path):
    columns = [tf.feature_column.numeric_column("x", shape=[4])]
    receiver = serving.parsing_receiver(columns)
    path = serving.export_and_check(x_model, receiver, {"x": X[:5]}, str(tmp_path))
    predictor = serving.Predictor(path)
    assert list(predictor.inputs) == ["examples"]
    want = _predict(x_model, {"x": X})
    np.testing.assert_allclose(predictor({"x": X.tolist()})["logits"], want["logits"], atol=1e-5)
    # Serialized examples are accepted as they are, too.
    example = tf.train.Example()
    example.features.feature["x"].float_list.value.extend(X[0].tolist())
    got = predictor({"examples": [example.SerializeToString()]})
    np.testing.assert_allclose(got["logits"], want["logits"][:1], atol=1e-5)
    with pytest.raises(serving.PredictorInputError, match=r"unknown: \['y'\]"):
        predictor({"x": X[:2], "y": [1, 2]})
    with pytest.raises(serving.PredictorInputError, match=r"per example.*'x': None"):
        predictor({"x": 1.0})


def test_bert_receiver(tmp_path):
    est = _train(str(tmp_path / "model"), BERT, Y[:32], "bert", steps=5)
    path = serving.export_and_check(
        est, serving.bert_receiver(6), {k: v[:4] for k, v in BERT.items()}, str(tmp_path / "e")
    )
    predictor = serving.Predictor(path)
    assert sorted(predictor.inputs) == ["input_ids", "input_mask", "segment_ids"]
    assert all(
        s.dtype == tf.int32 and s.shape.as_list() == [None, 6] for s in predictor.inputs.values()
    )
    np.testing.assert_allclose(predictor(BERT)["logits"], _predict(est, BERT)["logits"], atol=1e-5)
    with_labels = est.export_saved_model(
        str(tmp_path / "l"), serving.bert_receiver(6, with_label_ids=True)
    )
    labelled = serving.Predictor(with_labels.decode())
    assert "label_ids" in labelled.inputs
    # label_ids feeds nothing the outputs need: it may be left out, as tf.contrib.predictor
    # allowed (the Predictor refused the call).
    want = predictor(BERT)["logits"]
    for _ in range(2):
        np.testing.assert_allclose(labelled(BERT)["logits"], want, atol=1e-6)
    labels = {**BERT, "label_ids": np.zeros(32, np.int32)}
    np.testing.assert_allclose(labelled(labels)["logits"], want, atol=1e-6)
    assert list(labelled._subset_runs) == [frozenset(BERT)]  # one callable per set of keys
    without_ids = {k: v for k, v in BERT.items() if k != "input_ids"}
    with pytest.raises(
        serving.PredictorInputError,
        match=r"missing: \['input_ids', 'label_ids'\].*depend on \['input_ids'\]",
    ):
        labelled(without_ids)
    with pytest.raises(serving.PredictorInputError, match=r"unknown: \['extra'\]"):
        labelled({**BERT, "extra": [1]})


def test_image_bytes_receiver_decodes_png_and_jpeg(tmp_path):
    est = _train(
        str(tmp_path / "model"),
        {"image": IMAGES.astype(np.float32) / 127.5 - 1},
        Y[:16],
        "image",
        5,
    )
    png = [tf2.io.encode_png(image).numpy() for image in IMAGES[:4]]
    jpeg = tf2.io.encode_jpeg(IMAGES[0]).numpy()
    receiver = serving.image_bytes_receiver(IMAGE)
    path = serving.export_and_check(est, receiver, {"image_bytes": png + [jpeg]}, str(tmp_path))
    predictor = serving.Predictor(path)
    assert list(predictor.inputs) == ["image_bytes"]
    # PNG is lossless and needs no resize here, so the graph's features are exactly [-1, 1] pixels.
    want = _predict(est, {"image": IMAGES[:4].astype(np.float32) / 127.5 - 1})
    got = predictor({"image_bytes": png + [jpeg]})
    np.testing.assert_allclose(got["logits"][:4], want["logits"], atol=1e-4)
    # JPEG is lossy: its answer is the model's on the pixels the JPEG decodes to.
    decoded = tf2.io.decode_jpeg(jpeg).numpy().astype(np.float32) / 127.5 - 1
    np.testing.assert_allclose(
        got["logits"][4:], _predict(est, {"image": decoded[None]})["logits"], atol=1e-4
    )
    # One batch may mix sizes and channel counts: each image is decoded to RGB and resized.
    gray = tf2.io.encode_png(np.kron(IMAGES[1][..., :1], np.ones((2, 2, 1), np.uint8))).numpy()
    mixed = predictor({"image_bytes": [png[0], gray]})["logits"]
    rgb = np.repeat(IMAGES[1][..., :1], 3, axis=2).astype(np.float32) / 127.5 - 1
    want_gray = _predict(est, {"image": rgb[None]})["logits"]
    np.testing.assert_allclose(mixed, np.concatenate([want["logits"][:1], want_gray]), atol=1e-4)


def test_receiver_arguments_are_checked():
    with pytest.raises(TypeError, match="spec"):
        serving.raw_receiver([1, 2])
    with pytest.raises(TypeError, match=r"spec\['x'\].*\(dtype, shape\).*'four'"):
        serving.raw_receiver({"x": ("float32", "four")})
    with pytest.raises(TypeError, match=r"spec\['x'\].*\(dtype, shape\)"):
        serving.raw_receiver({"x": X})
    with pytest.raises(ValueError, match="max_seq_length.*Got: 0"):
        serving.bert_receiver(0)
    with pytest.raises(ValueError, match="image_size"):
        serving.image_bytes_receiver((8, 8, 3))


def test_predictor_input_errors_name_the_input(x_export):
    predictor = serving.Predictor(x_export)
    with pytest.raises(
        serving.PredictorInputError, match=r"x: float32 \[None, 4\].*missing: \['x'\]"
    ):
        predictor({"z": X})
    # A wrong dtype, like a wrong shape: the input, the dtype given and the one expected.
    with pytest.raises(serving.PredictorInputError, match="'x'.*dtype <U1.*x: float32"):
        predictor({"x": [["a", "b", "c", "d"]]})
    with pytest.raises(serving.PredictorInputError, match="'x'.*dtype bool.*x: float32"):
        predictor({"x": np.ones([1, 4], bool)})
    with pytest.raises(serving.PredictorInputError, match=r"'x'.*\[2, 3\].*\[None, 4\]"):
        predictor({"x": X[:2, :3]})
    with pytest.raises(serving.PredictorInputError, match=r"'x' has shape \[4\]"):
        predictor({"x": X[0]})
    with pytest.raises(TypeError, match="dict"):
        predictor(X)
    with pytest.raises(ValueError, match="signature.*serving_default"):
        serving.Predictor(x_export, signature="nope")
    with pytest.raises(ValueError, match=r"`tags` \['gpu'\].*MetaGraph.*\[\['serve'\]\]"):
        serving.Predictor(x_export, tags=("gpu",))
    # Safe conversions are made: Python floats (float64) and ints into float32.
    assert predictor({"x": [[1, 2, 3, 4]]})["logits"].shape == (1, 2)
    # A value float32 cannot hold was inf, answered without a word.
    with pytest.raises(serving.PredictorInputError, match=r"'x' holds 1e\+40, out of float32"):
        predictor({"x": [[1.0, 2.0, 1e40, 4.0]]})
    assert np.isnan(predictor({"x": [[np.nan, 2, 3, 4]]})["logits"]).all()  # NaN stays NaN


def test_predictor_names_glob_characters_in_the_export_path(x_export, tmp_path):
    # TensorFlow looks up the variables as a pattern: "export the model again" did not help.
    moved = shutil.copytree(x_export, str(tmp_path / "lr[0.1]" / "1"))
    with pytest.raises(serving.ExportLoadError, match=r"lr\[0\.1\].*without the characters"):
        serving.Predictor(moved)


def test_predictor_batches_large_inputs(x_export):
    predictor = serving.Predictor(os.path.dirname(x_export), batch_size=7)
    assert predictor.export_dir == x_export
    np.testing.assert_allclose(
        predictor({"x": X})["logits"], predictor({"x": X}, batch_size=64)["logits"], atol=1e-6
    )


def _keyed_model_fn(features, labels, mode):
    """Serves x_model's weights with an instance key passed through and a squeezed output."""
    logits = tf.layers.dense(features["x"], 2, name="logits")
    # tf.squeeze of [None, 1] has no static rank: the Predictor cannot tell from the signature
    # that it has one row per example.
    margin = tf.squeeze(logits[:, 1:] - logits[:, :1])
    predictions = {"id": features["id"], "margin": margin, "logits": logits}
    return estimator.EstimatorSpec(mode, predictions=predictions)


def test_predictor_serves_passed_through_keys_and_outputs_of_unknown_rank(x_model, tmp_path):
    est = estimator.Estimator(_keyed_model_fn, model_dir=x_model.model_dir)
    receiver = serving.raw_receiver({"x": (tf.float32, [4]), "id": (tf.string, [])})
    ids = np.array([f"row-{i}".encode() for i in range(len(X))], dtype=object)
    # The signature's output "id" is its input tensor: fed and fetched at once.
    path = serving.export_and_check(est, receiver, {"x": X[:8], "id": ids[:8]}, str(tmp_path))
    # 64 rows in runs of 7 would leave one row for the last run, whose answer tf.squeeze makes
    # a scalar: no run is given a single row.
    with serving.Predictor(path, batch_size=7) as predictor:
        assert predictor.outputs["margin"].shape.rank is None
        got = predictor({"x": X, "id": ids})
    logits = _predict(x_model, {"x": X})["logits"]
    np.testing.assert_array_equal(got["id"], ids)
    assert got["margin"].shape == (len(X),), "every chunk's rows come back, not the first's"
    np.testing.assert_allclose(got["margin"], logits[:, 1] - logits[:, 0], rtol=1e-5, atol=1e-5)


def test_latest_export_skips_partial_exports(x_export, tmp_path):
    base = tmp_path / "exports"
    shutil.copytree(x_export, base / "100")
    shutil.copytree(x_export, base / "300")
    os.remove(base / "300" / "variables" / "variables.index")  # a crash mid-copy
    shutil.copytree(x_export, base / "temp-400")  # an export still being written
    assert serving.latest_export(str(base)) == str(base / "100")
    assert serving.Predictor(str(base)).export_dir == str(base / "100")
    shutil.rmtree(base / "100")
    with pytest.raises(serving.ExportNotFoundError, match=r"\['300', 'temp-400'\]"):
        serving.latest_export(str(base))
    os.makedirs(tmp_path / "model_dir" / "export" / "best")  # not a base: its exporters' are
    with pytest.raises(serving.ExportNotFoundError, match=r"its export/ holds \['best'\]"):
        serving.Predictor(str(tmp_path / "model_dir"))
    with pytest.raises(FileNotFoundError, match="not a directory"):
        serving.latest_export(str(tmp_path / "missing"))


def test_export_and_check_raises_on_mismatch(tmp_path):
    est = _train(str(tmp_path / "model"), {"x": X}, Y, "x", steps=2, noise=True)
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    with pytest.raises(serving.ExportMismatchError, match="differently.*logits"):
        serving.export_and_check(est, receiver, {"x": X[:4]}, str(tmp_path / "e"))


def test_export_and_check_canned_estimators_with_feature_columns(tmp_path):
    # Canned estimators export classification / regression signatures as serving_default (or
    # only "predict" for several raw inputs); the check must use the one mirroring predict.
    rng = np.random.RandomState(1)
    data = {
        "age": rng.uniform(18, 80, 32).astype(np.float32),
        "city": rng.choice(["oslo", "rome", "paris"], 32),
    }
    labels = (data["age"] > 40).astype(np.int32)
    age = tf.feature_column.numeric_column("age")
    city = tf.feature_column.categorical_column_with_vocabulary_list("city", ["oslo", "rome"])
    bucket = tf.feature_column.bucketized_column(age, [30, 50])
    sample = {k: v[:5] for k, v in data.items()}

    def train_fn():
        return tf.data.Dataset.from_tensor_slices((data, labels)).repeat().batch(16)

    dnn_columns = [
        age,
        tf.feature_column.embedding_column(city, 2),
        tf.feature_column.indicator_column(bucket),
    ]
    dnn = estimator.DNNClassifier([3], dnn_columns, model_dir=str(tmp_path / "dnn"))
    dnn.train(train_fn, steps=2)
    linear_columns = [age, city, bucket]
    linear = estimator.LinearRegressor(linear_columns, model_dir=str(tmp_path / "linear"))
    linear.train(lambda: train_fn().map(lambda f, y: (f, tf.cast(y, tf.float32))), steps=2)
    for name, est, columns in (("dnn", dnn, dnn_columns), ("linear", linear, linear_columns)):
        receivers = {
            "raw": serving.raw_receiver({"age": (tf.float32, []), "city": (tf.string, [])}),
            "parsing": serving.parsing_receiver(columns),
        }
        for kind, receiver in receivers.items():
            with captured_tf_log(logging.WARNING) as warnings:
                path = serving.export_and_check(est, receiver, sample, str(tmp_path / name / kind))
            assert "predict" in serving.read_signatures(path)[1]
            # Estimator's "predict yields forever. This is probably a mistake." was its own.
            assert not [line for line in warnings if "yields forever" in line], warnings


def _exports(base):
    return sorted(p for p in os.listdir(base) if p.isdigit()) if os.path.isdir(base) else []


@pytest.mark.slow
def test_best_exporter_exports_only_improvements_and_survives_restart(tmp_path):
    model_dir = str(tmp_path / "model")
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    base = os.path.join(model_dir, "export", "best")
    exporter = serving.best_exporter(receiver, exports_to_keep=2)
    est = _train(model_dir, {"x": X}, Y, "x", steps=1)

    def evaluate_and_export(exporter, est, name="holdout"):
        result = est.evaluate(
            lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(32), name=name
        )
        return exporter.export(est, base, est.latest_checkpoint(), result, False), result

    first, result1 = evaluate_and_export(exporter, est)
    assert first is not None and len(_exports(base)) == 1
    with open(os.path.join(first.decode(), "assets.extra", serving.EXPORT_METRICS_FILE)) as f:
        saved = json.load(f)
    assert saved["monitor"] == "loss" and saved["value"] == pytest.approx(result1["loss"])
    est.train(
        lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(16), steps=30
    )
    second, result2 = evaluate_and_export(exporter, est)
    assert result2["loss"] < result1["loss"] and second is not None
    est.train(
        lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(16), steps=30
    )
    third, result3 = evaluate_and_export(exporter, est)
    assert result3["loss"] < result2["loss"] and third is not None
    # Garbage-collected to exports_to_keep: the oldest went.
    assert _exports(base) == sorted(os.path.basename(p.decode()) for p in (second, third))

    # A restart: a new exporter instance, and a worse model (fewer steps) evaluated into the
    # same eval_holdout dir; nothing is exported, though this is the instance's first call.
    worse = _train(str(tmp_path / "worse"), {"x": X}, Y, "x", steps=1)
    before = _exports(base)
    restarted = serving.best_exporter(receiver, exports_to_keep=2)
    result = worse.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(32))
    assert restarted.export(worse, base, worse.latest_checkpoint(), result, True) is None
    assert _exports(base) == before


def test_best_exporter_monitor_and_arguments(x_model, tmp_path):
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    exporter = serving.best_exporter(receiver, monitor="auc", mode="max")
    result = x_model.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(64))
    with pytest.raises(ValueError, match=r"'auc'.*\['accuracy', 'global_step', 'loss'\]"):
        exporter.export(x_model, str(tmp_path), None, result, False)
    by_accuracy = serving.best_exporter(receiver, monitor="accuracy", mode="max", name="acc")
    assert by_accuracy.name == "acc"
    assert by_accuracy.export(x_model, str(tmp_path), None, result, False) is not None
    worse = dict(result, accuracy=result["accuracy"] - 0.1)
    assert by_accuracy.export(x_model, str(tmp_path), None, worse, False) is None
    with pytest.raises(ValueError, match="mode"):
        serving.best_exporter(receiver, mode="best")
    # Left to mode="auto", accuracy is maximised (the default once kept the worst model).
    by_name = serving.best_exporter(receiver, monitor="accuracy", name="auto")
    assert by_name.export(x_model, str(tmp_path / "auto"), None, result, False) is not None
    assert by_name.export(x_model, str(tmp_path / "auto"), None, worse, False) is None
    with pytest.raises(ValueError, match="exports_to_keep"):
        serving.best_exporter(receiver, exports_to_keep=0)
    # export/. deleted the user's own exports beside; ../../x exported outside model_dir.
    for name in (".", "../../stolen", "a/b", ""):
        with pytest.raises(ValueError, match=r"`name` must be one directory name"):
            serving.best_exporter(receiver, name=name)
    assert isinstance(by_accuracy, estimator.Exporter)


def test_best_exporter_says_a_nan_metric_is_not_exported(x_model, tmp_path):
    # NaN in the eval data: "None is not better than None" at INFO, at every evaluation.
    exporter = serving.best_exporter(serving.raw_receiver({"x": (tf.float32, [4])}))
    result = {"loss": np.float32("nan"), "global_step": 10}
    with captured_tf_log(logging.WARNING) as warnings:
        assert exporter.export(x_model, str(tmp_path), None, result, False) is None
    assert len(warnings) == 1 and "'loss' is nan" in warnings[0] and "not exported" in warnings[0]


def test_best_exporter_skips_a_checkpoint_deleted_before_export(x_model, tmp_path):
    # In a cluster the chief may delete the checkpoint the evaluator just evaluated.
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    exporter = serving.best_exporter(receiver)
    result = x_model.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(64))
    gone = str(tmp_path / "model.ckpt-123")
    assert exporter.export(x_model, str(tmp_path / "e"), gone, result, False) is None
    assert _exports(str(tmp_path / "e")) == []
    # The improvement was not recorded, so the next (existing) checkpoint is exported.
    latest = x_model.latest_checkpoint()
    assert exporter.export(x_model, str(tmp_path / "e"), latest, result, False) is not None


def test_best_exporter_reused_after_its_model_dir_was_wiped(tmp_path):
    # One instance, two runs in the same model_dir (a notebook that deletes it and trains
    # again): the first run's best was kept in memory and blocked every export of the second.
    model_dir = str(tmp_path / "model")
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    base = os.path.join(model_dir, "export", "best")
    exporter = serving.best_exporter(receiver)

    def evaluate_and_export(est):
        result = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(32))
        return exporter.export(est, base, est.latest_checkpoint(), result, False), result

    first, result1 = evaluate_and_export(_train(model_dir, {"x": X}, Y, "x", steps=30))
    assert first is not None
    shutil.rmtree(model_dir)
    # Trained on the opposite labels: worse than the wiped run's best whatever the initial
    # weights (unseeded Keras initializers follow Python's random state, which other tests
    # set), yet exported.
    second, result2 = evaluate_and_export(_train(model_dir, {"x": X}, 1 - Y, "x", steps=30))
    assert result2["loss"] > result1["loss"]
    assert second is not None and len(_exports(base)) == 1


def test_parsing_receiver_takes_multi_valued_features_of_any_length(tmp_path):
    # A multi-valued categorical column is a VarLenFeature: each example holds as many tags
    # as it has, so the per-example lists differ in length (and NumPy refuses them as an array).
    columns = [
        tf.feature_column.numeric_column("x"),
        tf.feature_column.categorical_column_with_vocabulary_list("tags", ["a", "b", "c"]),
    ]
    spec = tf.feature_column.make_parse_example_spec(columns)
    xs = [0.5, -1.0, 2.0, 0.1]
    tags = [["a", "b"], ["c"], [], ["a", "c", "c"]]

    def serialized(x, example_tags):
        example = tf.train.Example()
        example.features.feature["x"].float_list.value.append(x)
        example.features.feature["tags"].bytes_list.value.extend(t.encode() for t in example_tags)
        return example.SerializeToString()

    data = [serialized(x, t) for x, t in zip(xs, tags)]

    def input_fn(labels=None):
        dataset = tf.data.Dataset.from_tensor_slices(data if labels is None else (data, labels))
        if labels is not None:
            return dataset.repeat().batch(4).map(lambda s, y: (tf.io.parse_example(s, spec), y))
        return dataset.batch(4).map(lambda s: tf.io.parse_example(s, spec))

    est = estimator.LinearClassifier(columns, model_dir=str(tmp_path / "model"))
    est.train(lambda: input_fn([1, 0, 1, 0]), steps=5)
    path = est.export_saved_model(str(tmp_path / "e"), serving.parsing_receiver(columns))
    predictor = serving.Predictor(path, "predict")
    want = np.stack([r["probabilities"] for r in est.predict(input_fn)])
    got = predictor({"x": xs, "tags": tags})["probabilities"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(predictor({"examples": data})["probabilities"], want, atol=1e-6)
    # Wrong input is still told apart: a number as a tag, uneven nesting, a bare value.
    with pytest.raises(serving.PredictorInputError, match="'tags'.*string"):
        predictor({"x": [0.5], "tags": [[1, 2]]})
    with pytest.raises(serving.PredictorInputError, match="'x'.*float"):
        predictor({"x": [[[0.5], [1.0, 2.0]]], "tags": [["a"]]})
    with pytest.raises(serving.PredictorInputError, match="per example.*'tags': None"):
        predictor({"x": [0.5], "tags": "a"})


def _threshold_model_fn(features, labels, mode):
    """x_model's weights with a non-batched knob: which rows are confident above ``threshold``."""
    probabilities = tf.nn.softmax(tf.layers.dense(features["x"], 2, name="logits"))
    threshold = features["threshold"]
    confident = tf.reduce_max(probabilities, 1) > threshold
    predictions = {"probabilities": probabilities, "confident": confident, "threshold": threshold}
    return estimator.EstimatorSpec(mode, predictions=predictions)


def test_predictor_passes_a_scalar_input_whole_to_every_batch(x_model, tmp_path):
    def receiver():
        tensors = {
            "x": tf.placeholder(tf.float32, [None, 4], name="x"),
            "threshold": tf.placeholder(tf.float32, [], name="threshold"),
        }
        return estimator.export.ServingInputReceiver(tensors, tensors)

    est = estimator.Estimator(_threshold_model_fn, model_dir=x_model.model_dir)
    path = est.export_saved_model(str(tmp_path), receiver)
    probabilities = _predict(x_model, {"x": X})["probabilities"]
    threshold = np.float32(np.median(probabilities.max(1)))  # about half the rows above it
    # "threshold" sorts before "x": the batch must still be counted on x (64 rows, 10 runs, the
    # last two 6 and 2 rows rather than 7 and 1).
    with serving.Predictor(path, batch_size=7) as predictor:
        assert predictor.inputs["threshold"].shape.rank == 0
        run, runs = predictor._run, []
        predictor._run = lambda *values: runs.append([np.shape(v) for v in values]) or run(*values)
        got = predictor({"x": X, "threshold": float(threshold)})
        assert runs == [[(), (7, 4)]] * 8 + [[(), (6, 4)], [(), (2, 4)]]
        with pytest.raises(serving.PredictorInputError, match=r"expects threshold: float32 \[\]"):
            predictor({"x": X[:2], "threshold": [0.9, 0.8]})
    np.testing.assert_allclose(got["probabilities"], probabilities, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["confident"], got["probabilities"].max(1) > threshold)
    assert 0 < got["confident"].sum() < len(X)
    assert got["threshold"] == threshold


def _logits_model_fn(features, labels, mode):
    """x_model's weights reading only ``x``, whatever else the receiver holds."""
    logits = tf.layers.dense(features["x"], 2, name="logits")
    return estimator.EstimatorSpec(mode, predictions={"logits": logits})


def test_predictor_loads_an_export_with_a_sparse_input_and_refuses_to_feed_it(x_model, tmp_path):
    # A hand-written receiver with a sparse_placeholder: the signature names the SparseTensor's
    # three component tensors, not one tensor. The alternative "dense" signature takes only x.
    def receiver():
        x = tf.placeholder(tf.float32, [None, 4], name="x")
        tags = tf.sparse.placeholder(tf.string, [None, None], name="tags")
        return estimator.export.ServingInputReceiver(
            {"x": x, "tags": tags},
            {"x": x, "tags": tags},
            receiver_tensors_alternatives={"dense": {"x": x}},
        )

    est = estimator.Estimator(_logits_model_fn, model_dir=x_model.model_dir)
    path = est.export_saved_model(str(tmp_path), receiver).decode()
    predictor = serving.Predictor(path)
    assert predictor.inputs["tags"].name == "coo_sparse"
    assert predictor.inputs["x"] == tf2.TensorSpec([None, 4], tf.float32, name="x:0")
    with pytest.raises(serving.PredictorInputError, match=r"sparse .*\['tags'\].*parsing_receiver"):
        predictor({"x": X[:2], "tags": [["a"], ["b", "c"]]})
    # The export's other signature is served from the same graph.
    dense = serving.Predictor(path, "dense:serving_default", batch_size=7)
    got = dense({"x": X})
    np.testing.assert_allclose(
        got["logits"], _predict(x_model, {"x": X})["logits"], rtol=1e-5, atol=1e-5
    )


def test_predictor_takes_empty_inputs_of_any_dtype(x_model, tmp_path):
    # [] is float64 to NumPy: it was refused for an integer input.
    est = estimator.Estimator(_logits_model_fn, model_dir=x_model.model_dir)
    raw = est.export_saved_model(
        str(tmp_path / "raw"), serving.raw_receiver({"x": (tf.float32, [4]), "i": (tf.int64, [])})
    )
    spec = {
        "x": tf.io.FixedLenFeature([4], tf.float32),
        "i": tf.io.FixedLenFeature([], tf.int64),
    }
    parsing = est.export_saved_model(str(tmp_path / "parsing"), serving.parsing_receiver(spec))
    for path in (raw, parsing):
        with serving.Predictor(path) as predictor:
            assert predictor({"x": np.zeros((0, 4)), "i": []})["logits"].shape == (0, 2)


@pytest.mark.parametrize(
    "monitor, higher",
    [("acc1", True), ("acc5", True), ("map50", True), ("mAP50-95", True), ("mse2", False)],
)
def test_best_exporter_auto_mode_reads_names_with_a_numeric_suffix(monitor, higher):
    # Top-k and IoU-threshold suffixes hid the metric: acc1 and map50 were minimised.
    from tfest_kit._model_dir import higher_is_better

    assert higher_is_better(monitor, "auto", "best_exporter") is higher


def test_official_best_exporter_exports_a_worse_model_after_a_restart(x_model, tmp_path):
    # Why best_exporter decides itself (tensorflow issue 47396): a new tf.estimator.BestExporter
    # reads the better loss from the eval events, yet exports a worse model on its first call;
    # a new best_exporter reads it from the metrics file of the earlier best export.
    model_dir = str(tmp_path / "model")
    shutil.copytree(x_model.model_dir, model_dir)
    est = estimator.Estimator(_model_fn, model_dir=model_dir, params={"kind": "x"})
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    base = os.path.join(model_dir, "export", "best")
    est.export_saved_model(base, receiver)  # the earlier best, before the restart
    with tf.Graph().as_default():
        writer = tf.summary.FileWriter(est.eval_dir())
        for step, loss in ((5, 0.01), (10, 5.0)):
            writer.add_summary(
                tf.Summary(value=[tf.Summary.Value(tag="loss", simple_value=loss)]), step
            )
        writer.close()
    worse = {"loss": np.float32(5.0), "global_step": np.int64(10)}
    official = estimator.BestExporter(serving_input_receiver_fn=receiver, exports_to_keep=None)
    assert official.export(est, base, est.latest_checkpoint(), worse, False) is not None
    assert len(_exports(base)) == 2
    ours_base = os.path.join(model_dir, "export", "ours")
    better = {"loss": np.float32(0.01), "global_step": np.int64(5)}
    first = serving.best_exporter(receiver, exports_to_keep=None)
    assert first.export(est, ours_base, est.latest_checkpoint(), better, False) is not None
    restarted = serving.best_exporter(receiver, exports_to_keep=None)
    assert restarted.export(est, ours_base, est.latest_checkpoint(), worse, False) is None
    assert len(_exports(ours_base)) == 1


@pytest.mark.parametrize(  # a crash mid-write; JSON without a number (it exported a worse
    # model, then exports_to_keep deleted the better ones); JSON not ours ("no attribute 'get'")
    "garbled",
    ['{"monitor": "lo', '{"monitor": "loss", "mode": "min", "value": null}', "[]"],
)
def test_best_exporter_never_replaces_an_export_whose_metrics_file_is_garbled(
    x_model, tmp_path, garbled
):
    model_dir = str(tmp_path / "model")
    # Without the eval events other tests wrote.
    shutil.copytree(x_model.model_dir, model_dir, ignore=shutil.ignore_patterns("eval*"))
    est = estimator.Estimator(_model_fn, model_dir=model_dir, params={"kind": "x"})
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    base, checkpoint = os.path.join(model_dir, "export", "best"), est.latest_checkpoint()
    step = int(checkpoint.rsplit("-", 1)[1])

    def result(loss):
        return {"loss": np.float32(loss), "global_step": np.int64(step)}

    temp_dirs = set(glob.glob(os.path.join(tempfile.gettempdir(), "tfest_kit_best_*")))
    best = serving.best_exporter(receiver, exports_to_keep=None)
    export = best.export(est, base, checkpoint, result(0.5), False).decode()
    # The metrics file was written in a directory each instance left in /tmp.
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "tfest_kit_best_*"))) == temp_dirs
    with open(os.path.join(export, "assets.extra", serving.EXPORT_METRICS_FILE), "w") as f:
        f.write(garbled)
    # Nothing tells its loss: after a restart it stays the best, and the warning says so.
    with captured_tf_log(logging.WARNING) as lines:
        restarted = serving.best_exporter(receiver, exports_to_keep=None)
        for _ in range(3):  # the warning once, not at every evaluation
            assert restarted.export(est, base, checkpoint, result(5.0), False) is None
    assert [export in line for line in lines if "stays the best" in line] == [True], lines
    # With its step in the eval events, its loss is read from them: worse is refused, better not.
    with tf.Graph().as_default():
        writer = tf.summary.FileWriter(est.eval_dir())
        writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="loss", simple_value=0.5)]), step)
        writer.close()
    again = serving.best_exporter(receiver, exports_to_keep=None)
    assert again.export(est, base, checkpoint, result(5.0), False) is None
    assert again.export(est, base, checkpoint, result(0.1), False) is not None


def test_best_exporter_compares_exports_chosen_by_another_monitor_by_its_own(x_model, tmp_path):
    # Before: exports chosen by accuracy counted as having no loss: a restarted loss exporter
    # exported at its first evaluation and exports_to_keep deleted them, without a word.
    model_dir = str(tmp_path / "model")
    shutil.copytree(x_model.model_dir, model_dir, ignore=shutil.ignore_patterns("eval*"))
    est = estimator.Estimator(_model_fn, model_dir=model_dir, params={"kind": "x"})
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    base, checkpoint = os.path.join(model_dir, "export", "best"), est.latest_checkpoint()

    def result(loss, accuracy):
        return {"loss": np.float32(loss), "accuracy": np.float32(accuracy), "global_step": 1}

    by_accuracy = serving.best_exporter(receiver, "accuracy", exports_to_keep=1)
    kept = by_accuracy.export(est, base, checkpoint, result(0.5, 0.9), False).decode()
    with captured_tf_log(logging.WARNING) as lines:
        by_loss = serving.best_exporter(receiver, "loss", exports_to_keep=1)
        assert by_loss.export(est, base, checkpoint, result(0.7, 0.95), False) is None
    assert _exports(base) == [os.path.basename(kept)]
    [said] = [line for line in lines if "chosen by another monitor" in line]
    assert kept in said and "'loss' (min)" in said and "name this exporter otherwise" in said
    assert by_loss.export(est, base, checkpoint, result(0.3, 0.8), False) is not None
    assert _exports(base) != [
        os.path.basename(kept)
    ]  # better by loss: exports_to_keep=1 replaced it, as said


def test_raw_receiver_says_when_a_shape_seems_to_hold_the_batch_dimension():
    # [None, 4] served [None, None, 4]: a model_fn's shape error, or a Predictor refusing [n, 4].
    with captured_tf_log(logging.WARNING) as warnings:
        serving.raw_receiver({"x": (tf.float32, [None, 4]), "tokens": (tf.int64, [None])})
    [said] = [w for w in warnings if "raw_receiver" in w]
    assert "spec['x']" in said and "[None, None, 4]" in said and "(tf.float32, [4])" in said


def test_raw_receiver_keeps_an_input_the_model_fn_pops(x_model, tmp_path):
    def model_fn(features, labels, mode, params):
        key = features.pop("key")  # an instance key passed through, as some model_fns do
        logits = _network(features, params)
        return estimator.EstimatorSpec(mode, predictions={"key": key, "logits": logits})

    est = estimator.Estimator(model_fn, model_dir=x_model.model_dir, params={"kind": "x"})
    spec = {"x": (tf.float32, [4]), "key": (tf.string, [])}
    ours = serving.Predictor(
        est.export_saved_model(str(tmp_path / "ours"), serving.raw_receiver(spec))
    )
    assert ours({"x": X[:2], "key": ["a", "b"]})["key"].tolist() == [b"a", b"b"]
    # The official receiver hands the model_fn the dict that becomes the signature's inputs:
    # with the key popped, the export silently has no serving signature.
    with tf.Graph().as_default():
        templates = {
            "x": tf.placeholder(tf.float32, [None, 4], name="x"),
            "key": tf.placeholder(tf.string, [None], name="key"),
        }
    official = estimator.export.build_raw_serving_input_receiver_fn(templates)
    path = est.export_saved_model(str(tmp_path / "official"), official)
    assert "serving_default" not in serving.read_signatures(path.decode())[1]
