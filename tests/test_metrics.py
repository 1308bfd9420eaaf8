"""Streaming metrics over uneven batches equal scikit-learn over the whole set."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from tfest_kit import metrics
from tfest_kit._tf import tf

NUM_CLASSES = 5
# Uneven batch sizes, including a batch of one.
BATCH_SIZES = (7, 1, 13, 4, 25, 10)


def _data(seed=0):
    rng = np.random.RandomState(seed)
    n = sum(BATCH_SIZES)
    # Class 4 never occurs in the labels and class 3 is never predicted; class 4 is predicted
    # a few times (false positives only).
    labels = rng.choice([0, 1, 2, 3], size=n, p=[0.5, 0.25, 0.15, 0.1])
    predictions = np.where(rng.rand(n) < 0.6, labels, rng.choice([0, 1, 2, 4], size=n))
    predictions = np.where(predictions == 3, 0, predictions)
    weights = rng.uniform(0.1, 3.0, size=n)
    logits = rng.randn(n, NUM_CLASSES)
    return labels, predictions, weights, logits


def _stream(build, feeds, *, shapes):
    """Builds a metric on placeholders, runs update_op per batch, returns the final value."""
    with tf.Graph().as_default():
        placeholders = {
            key: tf.placeholder(dtype, shape, name=key) for key, (dtype, shape) in shapes.items()
        }
        value_op, update_op = build(**placeholders)
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            start = 0
            for size in BATCH_SIZES:
                batch = {placeholders[k]: v[start : start + size] for k, v in feeds.items()}
                sess.run(update_op, batch)
                start += size
            assert start == len(next(iter(feeds.values())))
            return sess.run(value_op)


def _sklearn(name, labels, predictions, average, weights):
    fn = {"precision": skm.precision_score, "recall": skm.recall_score, "f1": skm.f1_score}[name]
    return fn(labels, predictions, average=average, sample_weight=weights, zero_division=0)


@pytest.mark.parametrize("name", ["precision", "recall", "f1"])
@pytest.mark.parametrize("average", ["micro", "macro", "weighted"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_scores_match_sklearn_over_uneven_batches(name, average, weighted):
    labels, predictions, weights, _ = _data()
    fn = getattr(metrics, name)
    feeds = {"labels": labels, "predictions": predictions}
    shapes = {"labels": (tf.int64, [None]), "predictions": (tf.int64, [None])}
    if weighted:
        feeds["weights"] = weights
        shapes["weights"] = (tf.float32, [None])

    def build(**tensors):
        return fn(num_classes=NUM_CLASSES, average=average, **tensors)

    got = _stream(build, feeds, shapes=shapes)
    expected = _sklearn(name, labels, predictions, average, weights if weighted else None)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_macro_leaves_out_classes_seen_only_in_weight_zero_rows():
    # Padding rows masked with weight 0 (BERT's is_real_example) must not add a class scoring 0
    # to the macro mean; scikit-learn would average it in.
    labels, predictions, weights, _ = _data(seed=4)
    padding = np.zeros(len(labels), bool)
    padding[::9] = True
    labels = np.where(padding, 4, labels)
    predictions = np.where(padding, 4, np.where(predictions == 4, 0, predictions))
    weights = np.where(padding, 0.0, weights)
    got = _stream(
        lambda **t: metrics.recall(num_classes=NUM_CLASSES, average="macro", **t),
        {"labels": labels, "predictions": predictions, "weights": weights},
        shapes={
            "labels": (tf.int64, [None]),
            "predictions": (tf.int64, [None]),
            "weights": (tf.float32, [None]),
        },
    )
    real = ~padding
    expected = skm.recall_score(
        labels[real], predictions[real], average="macro", sample_weight=weights[real]
    )
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    with_padding_class = _sklearn("recall", labels, predictions, "macro", weights)
    assert with_padding_class < expected


def test_labels_of_shape_batch_by_one_and_int32():
    labels, predictions, _, _ = _data(seed=1)
    got = _stream(
        lambda labels, predictions: metrics.f1(labels, predictions, NUM_CLASSES, average="macro"),
        {"labels": labels[:, None].astype(np.int32), "predictions": predictions},
        shapes={"labels": (tf.int32, [None, 1]), "predictions": (tf.int64, [None])},
    )
    np.testing.assert_allclose(got, _sklearn("f1", labels, predictions, "macro", None), rtol=1e-5)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_recall_at_k_matches_numpy(k, weighted):
    labels, _, weights, logits = _data(seed=3)
    feeds = {"labels": labels, "logits_or_probs": logits}
    shapes = {"labels": (tf.int64, [None]), "logits_or_probs": (tf.float32, [None, NUM_CLASSES])}
    if weighted:
        feeds["weights"] = weights
        shapes["weights"] = (tf.float32, [None])
    got = _stream(lambda **t: metrics.recall_at_k(k=k, **t), feeds, shapes=shapes)
    top_k = np.argsort(-logits, axis=1)[:, :k]
    hits = (top_k == labels[:, None]).any(axis=1).astype(np.float64)
    expected = np.average(hits, weights=weights if weighted else None)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_variables_are_local_metric_variables_and_reset():
    with tf.Graph().as_default():
        labels = tf.placeholder(tf.int64, [None])
        value_op, update_op = metrics.precision(labels, labels, num_classes=3, average="macro")
        local = tf.local_variables()
        assert local and set(local) == set(tf.get_collection(tf.GraphKeys.METRIC_VARIABLES))
        assert not tf.trainable_variables()
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            sess.run(update_op, {labels: [0, 1]})
            assert sess.run(value_op) == pytest.approx(1.0)
            sess.run(tf.local_variables_initializer())
            assert sess.run(value_op) == 0.0


def test_the_default_average_is_the_builders_macro_and_options_are_keyword_only():
    labels, predictions = [0, 0, 0, 1], [0, 0, 0, 0]
    with tf.Graph().as_default():
        value_op, update_op = metrics.f1(tf.constant(labels), tf.constant(predictions), 2)
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            sess.run(update_op)
            # As classifier(metrics=("f1",)) reports it, not micro F1 (here the accuracy 0.75).
            want = skm.f1_score(labels, predictions, average="macro")
            assert sess.run(value_op) == pytest.approx(want) and want < 0.5
        # Ported from tf.compat.v1.metrics, the 4th argument would be weights (or class_id).
        weights = tf.constant([1.0, 1.0, 1.0, 0.0])
        with pytest.raises(TypeError, match="positional"):
            metrics.precision(tf.constant(labels), tf.constant(predictions), 2, weights)
        with pytest.raises(TypeError, match="positional"):
            metrics.recall_at_k(tf.constant(labels), tf.zeros([4, 2]), 1, weights)


KERNEL = np.array([[1.0, -1.0, 0.5], [-0.5, 1.0, 2.0], [0.3, 0.2, -0.1]], np.float32)


def test_works_in_eval_metric_ops_of_a_real_estimator(tmp_path):
    x = np.random.RandomState(0).randn(50, 3).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)  # 3 classes

    def model_fn(features, labels, mode):
        kernel = tf.get_variable("kernel", initializer=tf.constant(KERNEL))
        logits = tf.matmul(features["x"], kernel)
        class_ids = tf.argmax(logits, axis=1)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(
                mode, predictions={"class_ids": class_ids, "logits": logits}
            )
        return tf.estimator.EstimatorSpec(
            mode,
            loss=tf.losses.sparse_softmax_cross_entropy(labels, logits),
            eval_metric_ops={
                "f1_macro": metrics.f1(labels, class_ids, 3, average="macro"),
                "recall_at_2": metrics.recall_at_k(labels, logits, k=2),
            },
        )

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(16)

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    outputs = list(est.predict(input_fn))
    predicted = np.array([p["class_ids"] for p in outputs])
    logits = np.array([p["logits"] for p in outputs])
    assert len(set(predicted)) == 3  # a non-trivial model
    top_2 = np.argsort(-logits, axis=1)[:, :2]
    for _ in range(2):  # the second evaluation must not see the first's counts
        result = est.evaluate(input_fn)
        np.testing.assert_allclose(
            result["f1_macro"], _sklearn("f1", y, predicted, "macro", None), rtol=1e-5
        )
        np.testing.assert_allclose(result["recall_at_2"], (top_2 == y[:, None]).any(1).mean())


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda t: metrics.f1(t, t, num_classes=1), "num_classes"),
        (lambda t: metrics.precision(t, t, num_classes=2.5), "num_classes"),
        (lambda t: metrics.recall(t, t, num_classes=3, average="samples"), "average"),
        (lambda t: metrics.f1(tf.zeros([4, 2], tf.int64), t, num_classes=3), "labels"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, argument):
    with tf.Graph().as_default():
        labels = tf.zeros([4], tf.int64)
        with pytest.raises(ValueError, match=f"`{argument}`.*Got"):
            call(labels)


def test_float_predictions_are_refused_and_float_labels_still_work():
    # A cast floored probabilities to class 0: f1 of these was 0.25 instead of an error.
    with tf.Graph().as_default():
        for build in (metrics.f1, metrics.precision, metrics.recall):
            with pytest.raises(
                ValueError, match=r"`predictions` must be integer class ids.*argmax.*float32"
            ):
                build(labels=[1, 0, 1, 1], predictions=[0.9, 0.1, 0.8, 0.7], num_classes=2)
    # Float labels holding class ids (a classifier's [batch, 1] labels) and bool predictions
    # (probabilities > 0.5) are class ids and keep working.
    labels, predictions = np.array([1, 0, 1, 1]), np.array([True, False, False, True])
    got = _stream(
        lambda **t: metrics.f1(num_classes=2, average="macro", **t),
        {"labels": np.repeat(labels, 15)[:, None] * 1.0, "predictions": np.repeat(predictions, 15)},
        shapes={"labels": (tf.float32, [None, 1]), "predictions": (tf.bool, [None])},
    )
    np.testing.assert_allclose(got, _sklearn("f1", labels, predictions, "macro", None), rtol=1e-5)
