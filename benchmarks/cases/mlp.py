"""Case 2: training examples/sec of a tiny MLP: what each front end costs per step."""

from __future__ import annotations

from benchmarks._harness import Case, Context, Metric, ratio_goal
from benchmarks.cases import TRAINING_VARIANTS

BATCH = 32
INPUTS = 16


def _features(rng, n):
    return {"x": rng.randn(n, INPUTS).astype("float32")}


def _logits(features):
    from tfest_kit._tf import tf

    hidden = tf.layers.dense(features["x"], 32, activation=tf.nn.relu, name="hidden")
    return tf.layers.dense(hidden, 2, name="logits")


def _keras():
    from tfest_kit._tf import tf2

    keras = tf2.keras
    inputs = keras.Input([INPUTS], name="x")
    hidden = keras.layers.Dense(32, "relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(2)(hidden))


def run(variant: str, ctx: Context) -> dict:
    from benchmarks.cases import _training

    return {
        "examples_per_sec": _training.train_throughput(
            variant,
            logits_fn=_logits,
            keras_fn=_keras,
            features_fn=_features,
            batch_size=BATCH,
            warmup=10 if ctx.quick else 20,
            steps=100 if ctx.quick else 1000,
        )
    }


# bfloat16 and replicas are for models whose step is matmuls (bert_tiny).
_VARIANTS = tuple(v for v in TRAINING_VARIANTS if v not in ("tfest_kit_bf16", "tfest_kit_replicas"))
CASE = Case(
    name="mlp",
    title="tiny MLP training (16 -> 32 -> 2, batch 32): per-step framework overhead",
    variants=_VARIANTS,
    # --quick runs every variant in one process: threads=(0, 1) would set the others' pools.
    quick_variants=tuple(v for v in _VARIANTS if v != "tfest_kit_intra1_loop100"),
    baseline="estimator",
    metrics=(Metric("examples_per_sec", "examples/s"),),
    run=run,
)

GOALS = [
    ratio_goal(
        "MLP: tfest_kit fallback, 100 steps per loop ≥ 1.0× the bare Session loop",
        "mlp",
        "examples_per_sec",
        "tfest_kit_loop100",
        "session",
        1.0,
    ),
    ratio_goal(
        "MLP: tfest_kit fallback, 10 steps per loop ≥ 1.0× Keras fit(steps_per_execution=10)",
        "mlp",
        "examples_per_sec",
        "tfest_kit_loop10",
        "keras_spe10",
        1.0,
    ),
    ratio_goal(
        "MLP: tfest_kit fallback, 100 steps per loop ≥ 1.0× Keras fit(steps_per_execution=100)",
        "mlp",
        "examples_per_sec",
        "tfest_kit_loop100",
        "keras_spe100",
        1.0,
    ),
    ratio_goal(
        "MLP: tfest_kit fallback, 100 steps per loop, threads=(0, 1) ≥ 1.0× Keras fit("
        "steps_per_execution=100)",
        "mlp",
        "examples_per_sec",
        "tfest_kit_intra1_loop100",
        "keras_spe100",
        1.0,
    ),
    ratio_goal(
        "MLP: Keras conversion, 10 steps per loop ≥ 1.0× one step per run",
        "mlp",
        "examples_per_sec",
        "keras_estimator_loop10",
        "keras_estimator",
        1.0,
    ),
    ratio_goal(
        "MLP: tfest_kit fallback ≥ 0.98× plain Estimator",
        "mlp",
        "examples_per_sec",
        "tfest_kit",
        "estimator",
        0.98,
    ),
    ratio_goal(
        "MLP: tfest_kit fallback ≥ 1.0× stock TPUEstimator(use_tpu=False)",
        "mlp",
        "examples_per_sec",
        "tfest_kit",
        "stock_tpu",
        1.0,
    ),
    ratio_goal(
        "MLP: plain Estimator ≥ 1.0× Keras fit",
        "mlp",
        "examples_per_sec",
        "estimator",
        "keras",
        1.0,
    ),
    ratio_goal(
        "MLP: tfest_kit fallback ≥ 1.0× Keras fit",
        "mlp",
        "examples_per_sec",
        "tfest_kit",
        "keras",
        1.0,
    ),
]
