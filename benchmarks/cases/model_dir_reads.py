"""Case 6: what one reading of a model_dir costs evaluate, predict and export.

tfest_kit's estimators find the checkpoint to restore with ``_model_dir.usable_checkpoint``
(the state file's checkpoint if intact, else the newest intact one) on every ``evaluate()``,
``predict()`` and ``export_saved_model()``; the official ``Estimator`` takes the state file's
word (``tf.train.latest_checkpoint``). Variants, the same ``model_fn`` in each:

* ``tfest_kit``: ``tfest_kit.tpu.TPUEstimator(use_tpu=False)``, the fallback;
* ``estimator``: ``tf.estimator.Estimator``.

The model_dir is trained once per benchmark run (set-up, cached in the case's workdir) with
the plain Estimator: a dense 512 -> 4 × 512 -> 2 stack, Adam, checkpoints at steps 0, 2, 4
and 6 (1.05 M weights, 12.6 MB per checkpoint with Adam's slots). Each process copies it,
then times, after one warm-up call each: ``evaluate()`` of 5 batches of 64, ``predict()`` of
one batch of 64 (all its outputs), ``export_saved_model()`` with a raw receiver, and the bare
checkpoint lookup (``usable_checkpoint(model_dir, "evaluate()")`` against
``tf.train.latest_checkpoint(model_dir)``): its first call in the process (``first_find_ms``,
before anything else) and later ones (``find_checkpoint_ms``). Medians over the calls.

Measured 2026-12-02 (2-core Xeon, TensorFlow 2.15, load 1.3-4.8 from other jobs, 3-5 processes
per variant): a later lookup 4.40 ms when every look read the checkpoint, 0.09 ms once verdicts
were kept (``tf.train.latest_checkpoint``: 0.06 ms); the first 7.4-7.8 ms (0.5 ms). The whole
calls move with the load (evaluate 0.92× before; 0.86-1.17× between runs): the in-process
interleaved comparison in docs/model_dir.md is steadier.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import numpy as np

from benchmarks._harness import Case, Context, Metric, median_seconds, ratio_goal

WIDTH, LAYERS, BATCH, EVAL_BATCHES = 512, 4, 64, 5


def _features(rng, n: int) -> np.ndarray:
    return rng.randn(n, WIDTH).astype(np.float32)


def _model_fn(features, labels, mode, params):
    from tfest_kit._tf import estimator, tf

    hidden = features["x"]
    for i in range(LAYERS):
        hidden = tf.layers.dense(hidden, WIDTH, activation=tf.nn.relu, name=f"dense_{i}")
    logits = tf.layers.dense(hidden, 2, name="logits")
    classes = tf.argmax(logits, axis=1)
    predictions = {"logits": logits, "class_ids": classes}
    if mode == estimator.ModeKeys.PREDICT:
        outputs = {"serving_default": estimator.export.PredictOutput(predictions)}
        return estimator.EstimatorSpec(mode, predictions=predictions, export_outputs=outputs)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == estimator.ModeKeys.EVAL:
        metrics = {"accuracy": tf.metrics.accuracy(labels, classes)}
        return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    train_op = tf.train.AdamOptimizer(1e-3).minimize(loss, tf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn(batches: int):
    def input_fn(params=None):
        from tfest_kit._tf import tf2

        rng = np.random.RandomState(1)
        x, y = _features(rng, BATCH * batches), rng.randint(0, 2, BATCH * batches)
        dataset = tf2.data.Dataset.from_tensor_slices(({"x": x}, y.astype(np.int32)))
        return dataset.batch(BATCH)

    return input_fn


def _plain(model_dir: str):
    from tfest_kit._tf import estimator

    # Estimator warns about an unused ``params`` argument; TPUEstimator requires one.
    return estimator.Estimator(
        lambda features, labels, mode: _model_fn(features, labels, mode, {}),
        model_dir=model_dir,
        config=estimator.RunConfig(save_checkpoints_steps=2),
    )


def _trained(workdir: str) -> str:
    model_dir = os.path.join(workdir, "model")
    if not os.path.exists(os.path.join(model_dir, "checkpoint")):
        _plain(model_dir).train(lambda: _input_fn(8)().repeat(), steps=6)
    return model_dir


def run(variant: str, ctx: Context) -> dict:
    from tfest_kit import tpu
    from tfest_kit._model_dir import usable_checkpoint
    from tfest_kit._tf import estimator, tf, tf2

    scratch = tempfile.mkdtemp(dir=ctx.workdir)
    model_dir = os.path.join(scratch, "model")
    shutil.copytree(_trained(ctx.workdir), model_dir)
    if variant == "tfest_kit":
        est = tpu.TPUEstimator(
            _model_fn,
            model_dir,
            use_tpu=False,
            train_batch_size=BATCH,
            eval_batch_size=BATCH,
            predict_batch_size=BATCH,
        )
        find = lambda: usable_checkpoint(model_dir, "evaluate()")  # noqa: E731
    elif variant == "estimator":
        est = _plain(model_dir)
        find = lambda: tf.train.latest_checkpoint(model_dir)  # noqa: E731
    else:
        raise ValueError(f"unknown variant {variant!r}")
    calls = 2 if ctx.quick else 9
    # A float32 [batch, WIDTH] placeholder "x" in the serving graph.
    receiver = estimator.export.build_raw_serving_input_receiver_fn({"x": tf2.zeros([1, WIDTH])})
    exports = iter(range(1000))  # a base of its own per export: no wait for a new timestamp
    start = time.perf_counter()
    find()  # the first lookup in the process
    metrics = {
        "first_find_ms": 1e3 * (time.perf_counter() - start),
        "evaluate_s": median_seconds(
            lambda: est.evaluate(_input_fn(EVAL_BATCHES)), calls, warmup=1
        ),
        "predict_s": median_seconds(
            lambda: list(est.predict(_input_fn(1), yield_single_examples=False)), calls, warmup=1
        ),
        "export_s": median_seconds(
            lambda: est.export_saved_model(f"{scratch}/export{next(exports)}", receiver),
            calls,
            warmup=1,
        ),
        "find_checkpoint_ms": 1e3 * median_seconds(find, 10 * calls, warmup=1),
    }
    shutil.rmtree(scratch, ignore_errors=True)
    return metrics


CASE = Case(
    name="model_dir_reads",
    title="evaluate / predict / export on a trained model_dir (dense 512 × 4, 12.6 MB "
    "checkpoints): tfest_kit's checkpoint lookup vs the plain Estimator's",
    variants=("tfest_kit", "estimator"),
    baseline="estimator",
    metrics=(
        Metric("evaluate_s", "s", higher_is_better=False),
        Metric("predict_s", "s", higher_is_better=False),
        Metric("export_s", "s", higher_is_better=False),
        Metric("first_find_ms", "ms", higher_is_better=False),
        Metric("find_checkpoint_ms", "ms", higher_is_better=False),
    ),
    run=run,
)

GOALS = [
    ratio_goal(
        f"model_dir reads: tfest_kit {call} ≥ 0.95× plain Estimator's speed",
        "model_dir_reads",
        f"{call}_s",
        "tfest_kit",
        "estimator",
        0.95,
    )
    for call in ("evaluate", "predict", "export")
]
