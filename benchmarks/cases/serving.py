"""Case 3: per-request latency and batch-64 throughput of three ways to serve a model.

* ``predictor``: ``tfest_kit.serving.Predictor`` (load once, then one session run per call);
* ``estimator_predict``: ``Estimator.predict`` (rebuilds the graph and restores the checkpoint
  on every call: what TF1 scripts do when they "just call predict");
* ``signature``: ``tf.saved_model.load(export).signatures["serving_default"]`` called eagerly.

The model is a small MLP trained and exported once per run of the benchmark (set-up).
"""

from __future__ import annotations

import glob
import os
import time

import numpy as np

from benchmarks._harness import Case, Context, Metric, ratio_goal

INPUTS = 16
BATCH = 64


def _model_fn(features, labels, mode):
    from tfest_kit._tf import estimator, tf

    hidden = tf.layers.dense(features["x"], 64, activation=tf.nn.relu, name="hidden")
    logits = tf.layers.dense(hidden, 2, name="logits")
    if mode == estimator.ModeKeys.PREDICT:
        predictions = {"probabilities": tf.nn.softmax(logits), "class_ids": tf.argmax(logits, 1)}
        return estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.AdamOptimizer(1e-3).minimize(loss, global_step=tf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _receiver():
    from tfest_kit._tf import estimator, tf

    x = tf.placeholder(tf.float32, [None, INPUTS], name="x")
    return estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def _setup(workdir: str):
    """Trains and exports once; later runs reuse the model_dir and export."""
    from tfest_kit._tf import estimator, tf2

    model_dir = os.path.join(workdir, "model")
    est = estimator.Estimator(_model_fn, model_dir=model_dir)
    exports = sorted(glob.glob(os.path.join(workdir, "export", "[0-9]*")))
    if not exports:
        rng = np.random.RandomState(0)
        x = rng.randn(256, INPUTS).astype(np.float32)
        y = (x[:, 0] > 0).astype(np.int32)
        est.train(
            lambda: tf2.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(32),
            steps=20,
        )
        est.export_saved_model(os.path.join(workdir, "export"), _receiver)
        exports = sorted(glob.glob(os.path.join(workdir, "export", "[0-9]*")))
    return est, exports[-1]


def _time_calls(fn, calls: int, warmup: int = 2) -> float:
    """Median seconds per call."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def run(variant: str, ctx: Context) -> dict:
    from tfest_kit._tf import tf2

    est, export_dir = _setup(ctx.workdir)
    rng = np.random.RandomState(1)
    one = rng.randn(1, INPUTS).astype(np.float32)
    batch = rng.randn(BATCH, INPUTS).astype(np.float32)
    fast_calls = 50 if ctx.quick else 300
    if variant == "predictor":
        from tfest_kit.serving import Predictor

        predictor = Predictor(export_dir)
        single = _time_calls(lambda: predictor({"x": one}), fast_calls)
        batched = _time_calls(lambda: predictor({"x": batch}), fast_calls)
    elif variant == "signature":
        signature = tf2.saved_model.load(export_dir).signatures["serving_default"]

        def call(x):
            return {k: v.numpy() for k, v in signature(x=tf2.constant(x)).items()}

        single = _time_calls(lambda: call(one), fast_calls)
        batched = _time_calls(lambda: call(batch), fast_calls)
    elif variant == "estimator_predict":

        def predict(x):
            def input_fn():
                return tf2.data.Dataset.from_tensor_slices({"x": x}).batch(len(x))

            return list(est.predict(input_fn, yield_single_examples=False))

        calls = 3 if ctx.quick else 10
        single = _time_calls(lambda: predict(one), calls, warmup=1)
        batched = _time_calls(lambda: predict(batch), calls, warmup=0)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return {"latency_ms": single * 1e3, "batch64_examples_per_sec": BATCH / batched}


CASE = Case(
    name="serving",
    title="serving a small MLP: single-example latency and batch-64 throughput",
    variants=("predictor", "estimator_predict", "signature"),
    baseline="estimator_predict",
    metrics=(
        Metric("latency_ms", "ms/request", higher_is_better=False),
        Metric("batch64_examples_per_sec", "examples/s"),
    ),
    run=run,
)

GOALS = [
    ratio_goal(
        "Predictor ≥ 200× faster per request than estimator.predict",
        "serving",
        "latency_ms",
        "predictor",
        "estimator_predict",
        200.0,
    ),
]
