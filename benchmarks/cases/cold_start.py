"""Case 5: cold start and shutdown.

Each run is a fresh process (``isolate``), so the figures include the Python and TensorFlow
start-up a user sees:

* ``first_step_s``: seconds from just before the process was spawned to the end of the first
  training step (tiny MLP);
* ``train_return_s``: seconds from the end of the last step to ``train()`` returning (final
  checkpoint, hooks' ``end``, closing the session);
* ``import_on_top_of_tf_s``: ``import tfest_kit`` (tfest_kit variant) or
  ``import tensorflow_estimator`` (estimator variant) after ``import tensorflow``. TensorFlow
  2.16+ has no ``tf.estimator``, and tensorflow-estimator 2.15 imports there only through
  tfest_kit's bridge: on those stacks the estimator variant imports ``tfest_kit`` for it (the
  least any Estimator costs there) and then trains the plain ``Estimator``;
* ``import_tensorflow_s``: ``import tensorflow`` itself.

This module imports nothing heavy at import time; the imports are what is measured.
"""

from __future__ import annotations

import tempfile
import time

from benchmarks._harness import Case, Context, Metric, value_goal

STEPS = 20
BATCH = 32


def _train(tf, est_module, make_estimator):
    """Trains the MLP; returns (wall time at the end of step 1, of the last step, at return)."""
    import numpy as np

    class Timer(est_module.SessionRunHook):
        def __init__(self):
            self.walls = []

        def after_run(self, run_context, run_values):
            self.walls.append(time.time())

    def model_fn(features, labels, mode, params):
        del params
        hidden = tf.layers.dense(features["x"], 32, activation=tf.nn.relu)
        logits = tf.layers.dense(hidden, 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.AdamOptimizer(1e-3).minimize(
            loss, global_step=tf.train.get_global_step()
        )
        return est_module.EstimatorSpec(mode, loss=loss, train_op=train_op)

    rng = np.random.RandomState(0)
    x, y = rng.randn(256, 16).astype(np.float32), rng.randint(0, 2, 256).astype(np.int32)

    def input_fn(params=None):
        del params
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(BATCH)

    timer = Timer()
    est = make_estimator(model_fn, tempfile.mkdtemp(prefix="bench_cold_"))
    est.train(input_fn, steps=STEPS, hooks=[timer])
    returned = time.time()
    # Runs, not steps: the fallback takes TPUConfig's iterations_per_loop (2) steps per run.
    trained = est.get_variable_value("global_step")
    if trained != STEPS or not timer.walls:
        raise RuntimeError(f"expected {STEPS} steps, trained {trained} in {len(timer.walls)} runs")
    return timer.walls[0], timer.walls[-1], returned


def run(variant: str, ctx: Context) -> dict:
    start = time.perf_counter()
    # Measuring the plain path means importing TensorFlow without tfest_kit's _tf module.
    import tensorflow

    after_tf = time.perf_counter()
    if variant == "tfest_kit":
        import tfest_kit

        after_extra = time.perf_counter()
        from tfest_kit import tpu  # not part of "import tfest_kit": submodules load on use

        del tfest_kit

        def make(model_fn, model_dir):
            return tpu.TPUEstimator(
                model_fn, model_dir=model_dir, use_tpu=False, train_batch_size=BATCH
            )

    elif variant == "estimator":
        major, minor = (int(part) for part in tensorflow.__version__.split(".")[:2])
        if (major, minor) >= (2, 16):
            import tfest_kit  # noqa: F401  (gives tf.estimator back; see the module docstring)
        # tf.compat.v1.estimator is a lazy module: touching a member imports the package.
        tensorflow.compat.v1.estimator.Estimator  # noqa: B018

        after_extra = time.perf_counter()

        def make(model_fn, model_dir):
            return tensorflow.compat.v1.estimator.Estimator(model_fn, model_dir=model_dir)

    else:
        raise ValueError(f"unknown variant {variant!r}")
    tf = tensorflow.compat.v1
    first, last, returned = _train(tf, tf.estimator, make)
    return {
        "first_step_s": first - ctx.t0,
        "train_return_s": returned - last,
        "import_on_top_of_tf_s": after_extra - after_tf,
        "import_tensorflow_s": after_tf - start,
    }


CASE = Case(
    name="cold_start",
    title="cold start: process start to first training step; train() return; import costs",
    variants=("tfest_kit", "estimator"),
    baseline="estimator",
    metrics=(
        Metric("first_step_s", "s", higher_is_better=False),
        Metric("train_return_s", "s", higher_is_better=False),
        Metric("import_on_top_of_tf_s", "s", higher_is_better=False),
        Metric("import_tensorflow_s", "s", higher_is_better=False, compare=False),
    ),
    run=run,
    isolate=True,
    quick_variants=("tfest_kit",),
)

GOALS = [
    value_goal(
        "train() (tfest_kit fallback) returns within 0.5 s of its last step",
        "cold_start",
        "train_return_s",
        "tfest_kit",
        at_most=0.5,
        fmt="{:.2f} s",
    ),
    value_goal(
        "import tfest_kit adds ≤ 0.2 s to import tensorflow",
        "cold_start",
        "import_on_top_of_tf_s",
        "tfest_kit",
        at_most=0.2,
        fmt="{:.2f} s",
    ),
]
