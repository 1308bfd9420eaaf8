"""Case 3: per-request latency and batch-64 throughput of three ways to serve a BERT-tiny model.

* ``predictor``: ``tfest_kit.serving.Predictor`` (load once, then one session run per call);
* ``estimator_predict``: ``Estimator.predict`` with a one-request ``input_fn`` per call (it
  rebuilds the graph and restores the checkpoint every time: what TF1 scripts do when they
  "just call predict");
* ``predictor_intra1``: the same with ``ConfigProto(intra_op_parallelism_threads=1)`` (full
  runs only: the intra-op pool is process-wide, so in the one-process ``--quick`` run it would
  leak into the other variants). Shows the latency / throughput trade of one thread per op;
* ``signature``: ``tf.saved_model.load(export).signatures["serving_default"]`` called eagerly
  with ``tf.constant`` inputs (the raw TF2 path).

The model is the BERT-tiny-like classifier of :mod:`benchmarks.cases._bert_tiny` (2 layers,
hidden 128, 2 heads, sequence 64) in ``tfest_kit.model_fn.classifier``, trained for a few
steps and exported with ``tfest_kit.serving.bert_receiver(64)`` once per benchmark run (set-up,
cached in the case's workdir). Every variant feeds the same int32 ``input_ids``,
``input_mask`` and ``segment_ids`` and fetches every output (logits, probabilities,
class_ids) as NumPy arrays.

Latency is the median wall time of one batch-1 request; throughput is 64 ÷ the median wall
time of one batch-64 request. Medians, because on a shared machine a few calls are slowed by
other processes.
"""

from __future__ import annotations

import glob
import os

import numpy as np

from benchmarks._harness import Case, Context, Metric, median_seconds, ratio_goal

BATCH = 64
_INPUTS = ("input_ids", "input_mask", "segment_ids")


def _features(rng, n: int) -> dict:
    from benchmarks.cases._bert_tiny import CONFIG

    shape = (n, CONFIG["seq_len"])
    return {
        "input_ids": rng.randint(0, CONFIG["vocab_size"], size=shape).astype(np.int32),
        "input_mask": np.ones(shape, np.int32),
        "segment_ids": np.zeros(shape, np.int32),
    }


def _network(features, mode, params):
    from benchmarks.cases import _bert_tiny

    return _bert_tiny.encoder_logits(features["input_ids"])


def _setup(workdir: str):
    """Trains a few steps and exports once; later runs reuse the model_dir and the export."""
    from benchmarks.cases._bert_tiny import CONFIG
    from tfest_kit import model_fn, serving
    from tfest_kit._tf import estimator, tf2

    est = estimator.Estimator(
        model_fn.classifier(_network, CONFIG["num_classes"], learning_rate=1e-4),
        model_dir=os.path.join(workdir, "model"),
    )
    exports = sorted(glob.glob(os.path.join(workdir, "export", "[0-9]*")))
    if not exports:
        rng = np.random.RandomState(0)
        features = _features(rng, 64)
        labels = rng.randint(0, CONFIG["num_classes"], size=64).astype(np.int32)
        est.train(
            lambda: tf2.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(16),
            steps=5,
        )
        est.export_saved_model(
            os.path.join(workdir, "export"), serving.bert_receiver(CONFIG["seq_len"])
        )
        exports = sorted(glob.glob(os.path.join(workdir, "export", "[0-9]*")))
    return est, exports[-1]


def run(variant: str, ctx: Context) -> dict:
    from tfest_kit._tf import tf2

    est, export_dir = _setup(ctx.workdir)
    rng = np.random.RandomState(1)
    one = _features(rng, 1)
    batch = _features(rng, BATCH)
    single_calls, batch_calls = (50, 20) if ctx.quick else (500, 100)
    if variant == "predictor":
        from tfest_kit.serving import Predictor

        predictor = Predictor(export_dir)
        single = median_seconds(lambda: predictor(one), single_calls)
        batched = median_seconds(lambda: predictor(batch), batch_calls)
    elif variant == "predictor_intra1":
        from tfest_kit._tf import tf
        from tfest_kit.serving import Predictor

        config = tf.ConfigProto(inter_op_parallelism_threads=-1, intra_op_parallelism_threads=1)
        predictor = Predictor(export_dir, session_config=config)
        single = median_seconds(lambda: predictor(one), single_calls)
        batched = median_seconds(lambda: predictor(batch), batch_calls)
    elif variant == "signature":
        signature = tf2.saved_model.load(export_dir).signatures["serving_default"]

        def call(features):
            tensors = {k: tf2.constant(v) for k, v in features.items()}
            return {k: v.numpy() for k, v in signature(**tensors).items()}

        single = median_seconds(lambda: call(one), single_calls)
        batched = median_seconds(lambda: call(batch), batch_calls)
    elif variant == "estimator_predict":

        def predict(features):
            def input_fn():
                return tf2.data.Dataset.from_tensor_slices(features).batch(
                    len(features["input_ids"])
                )

            return list(est.predict(input_fn, yield_single_examples=False))

        calls = 3 if ctx.quick else 10
        single = median_seconds(lambda: predict(one), calls, warmup=1)
        batched = median_seconds(lambda: predict(batch), calls, warmup=0)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return {"latency_ms": single * 1e3, "batch64_examples_per_sec": BATCH / batched}


CASE = Case(
    name="serving",
    title="serving a BERT-tiny-like classifier (bert_receiver(64)): batch-1 latency and "
    "batch-64 throughput",
    variants=("predictor", "estimator_predict", "signature", "predictor_intra1"),
    baseline="estimator_predict",
    quick_variants=("predictor", "estimator_predict", "signature"),
    metrics=(
        Metric("latency_ms", "ms/request", higher_is_better=False),
        Metric("batch64_examples_per_sec", "examples/s"),
    ),
    run=run,
)

GOALS = [
    ratio_goal(
        "Serving BERT-tiny: Predictor ≥ 200× faster per request than estimator.predict",
        "serving",
        "latency_ms",
        "predictor",
        "estimator_predict",
        200.0,
    ),
    ratio_goal(
        "Serving BERT-tiny: Predictor ≥ 1.5× faster than the raw TF2 signature at batch 1",
        "serving",
        "latency_ms",
        "predictor",
        "signature",
        1.5,
    ),
    ratio_goal(
        "Serving BERT-tiny: Predictor batch-64 throughput ≥ 1.0× the raw TF2 signature's",
        "serving",
        "batch64_examples_per_sec",
        "predictor",
        "signature",
        1.0,
    ),
]
