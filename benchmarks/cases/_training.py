"""Steady-state training throughput of one model under each front end.

* ``tfest_kit``: ``tfest_kit.tpu.TPUEstimator(use_tpu=False)``, the fallback, loss logging on,
  one step per ``Session.run`` (``iterations_per_loop=1``);
* ``tfest_kit_loop10``, ``tfest_kit_loop100``: the same with ``iterations_per_loop`` 10 / 100,
  that many steps in one ``Session.run`` (an in-graph loop, as on a TPU);
  ``tfest_kit_intra1_loop100``: loops of 100 with ``run_config(threads=(0, 1))``, an intra-op
  pool of one thread (fused optimizer kernels such as Adam's split a small variable's update
  over the pool, which costs more than it saves);
* ``tfest_kit_bf16``: the same with ``tfest_kit.session_config(mixed_precision="bfloat16")``
  (oneDNN's bfloat16 rewrite; variables stay float32);
* ``tfest_kit_replicas``: the fallback with ``tfest_kit.run_config(cpu_replicas=…)``, one
  float32 replica per core sharing the batch (each op on one thread);
* ``estimator``: ``tf.estimator.Estimator`` with the same model_fn (EstimatorSpec);
* ``stock_tpu``: ``tf.compat.v1.estimator.tpu.TPUEstimator(use_tpu=False)``;
* ``keras``: ``model.fit`` on the same network written with Keras layers;
  ``keras_spe10``, ``keras_spe100``: with ``compile(steps_per_execution=10 / 100)``;
* ``keras_estimator``: that Keras model through ``keras_bridge.to_estimator``;
  ``keras_estimator_loop10``, ``…_loop100``: with ``run_config(iterations_per_loop=10 / 100)``;
* ``session``: the same graph (input pipeline, model, Adam) run step by step in a bare
  ``tf.compat.v1.Session`` with Estimator's default ``ConfigProto``: no Estimator, no hooks.
  The ceiling of the TF1 runtime on this machine, to tell our per-step costs from TensorFlow's;
  ``session_loop100``: the fallback's 100-step loop (``_loop.training_loop``) in that Session.

Throughput is ``batch_size`` ÷ the median time between the ends of consecutive steps after
``warmup`` steps, timed by a hook (Keras: a callback; session: after each ``Session.run``;
where a run or an execution makes N steps, N × ``batch_size`` ÷ the median time between runs), so
graph building, session start and the final checkpoint are left out (cold start has its own
case). The median, not the mean: on a shared machine a few steps are slowed by other
processes, and the median ignores them.
"""

from __future__ import annotations

import re
import tempfile
import time
from typing import Callable

import numpy as np

from benchmarks.cases import TRAINING_VARIANTS
from tfest_kit._tf import estimator, tf, tf2

__all__ = ["train_throughput", "train_op", "matmul_gflops"]

_EXAMPLES = 512


class _StepTimer(estimator.SessionRunHook):
    def __init__(self):
        self.times = []

    def after_run(self, run_context, run_values):
        self.times.append(time.perf_counter())


def _rate(times: list, warmup: int, total: int, batch_size: int, per_run: int = 1) -> float:
    """``warmup`` and ``total`` in steps, ``per_run`` steps between two of ``times``."""
    if len(times) != -(-total // per_run):
        raise RuntimeError(f"expected {total} steps in runs of {per_run}, saw {len(times)} runs")
    warmup_runs = max(1, warmup // per_run)
    return per_run * batch_size / float(np.median(np.diff(times[warmup_runs - 1 :])))


def _steps_per_run(variant: str) -> int:
    """10 for ``tfest_kit_loop10`` or ``keras_spe10``; 1 without a number."""
    match = re.search(r"(loop|spe)(\d+)$", variant)
    return int(match.group(2)) if match else 1


def _data(features_fn: Callable, seed: int = 0):
    rng = np.random.RandomState(seed)
    features = features_fn(rng, _EXAMPLES)
    labels = rng.randint(0, 2, size=_EXAMPLES).astype(np.int32)
    return features, labels


def _dataset(features, labels, batch_size):
    ds = tf2.data.Dataset.from_tensor_slices((features, labels)).repeat()
    return ds.batch(batch_size, drop_remainder=True).prefetch(tf2.data.AUTOTUNE)


def _estimator_model_fn(logits_fn: Callable, learning_rate: float, tpu_spec: bool):
    def model_fn(features, labels, mode):
        logits = logits_fn(features)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        optimizer = tf.train.AdamOptimizer(learning_rate)
        train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
        if tpu_spec:
            return estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    if not tpu_spec:
        return model_fn
    # TPUEstimator requires a `params` argument; Estimator warns when it is there unused.
    return lambda features, labels, mode, params: model_fn(features, labels, mode)


def train_throughput(
    variant: str,
    *,
    logits_fn: Callable,
    keras_fn: Callable,
    features_fn: Callable,
    batch_size: int,
    warmup: int,
    steps: int,
    learning_rate: float = 1e-3,
) -> float:
    """Trains ``warmup + steps`` steps with ``variant``; returns steady-state examples/sec.

    ``logits_fn(features) -> logits`` builds the TF1 graph; ``keras_fn() -> keras.Model`` the
    same network in Keras; ``features_fn(rng, n)`` makes the features (a dict for Estimators).
    """
    features, labels = _data(features_fn)
    per_run = _steps_per_run(variant)
    # Whole loops, and at least a few of them after the warm-up.
    steps = max(steps, 3 * per_run)
    total = -(-(warmup + steps) // per_run) * per_run
    model_dir = tempfile.mkdtemp(prefix=f"bench_{variant}_")
    if variant.startswith("keras") and not variant.startswith("keras_estimator"):
        return _keras_throughput(keras_fn, features, labels, batch_size, warmup, total, per_run)

    def input_fn(params=None):
        size = (params or {}).get("batch_size", batch_size)
        return _dataset(features, labels, size)

    timer = _StepTimer()
    # The same checkpoint and summary cadence for every Estimator: a save at the start and end.
    common = {"model_dir": model_dir, "save_checkpoints_steps": 100_000, "tf_random_seed": 0}
    if variant == "estimator":
        model_fn = _estimator_model_fn(logits_fn, learning_rate, tpu_spec=False)
        est = estimator.Estimator(model_fn, config=estimator.RunConfig(**common))
    elif variant == "stock_tpu":
        model_fn = _estimator_model_fn(logits_fn, learning_rate, tpu_spec=True)
        est = estimator.tpu.TPUEstimator(
            model_fn,
            config=estimator.tpu.RunConfig(**common),
            use_tpu=False,
            train_batch_size=batch_size,
        )
    elif variant.startswith("tfest_kit"):
        import tfest_kit
        from tfest_kit import tpu
        from tfest_kit.config import _default_thread_count

        if variant == "tfest_kit_bf16":
            common["session_config"] = tfest_kit.session_config(mixed_precision="bfloat16")
        if variant == "tfest_kit_replicas":
            # A plain RunConfig (the fallback takes one): the strategy is one of its fields.
            # One replica per core this process may use, as many as divide the batch.
            cores = _default_thread_count()
            replicas = max(n for n in range(1, cores + 1) if batch_size % n == 0)
            config = tfest_kit.run_config(cpu_replicas=replicas, **common)
        elif "intra1" in variant:  # sets the process's pools: a process of its own
            config = tfest_kit.run_config(threads=(0, 1), iterations_per_loop=per_run, **common)
        else:
            loop = tpu.TPUConfig(iterations_per_loop=per_run)
            config = tpu.RunConfig(tpu_config=loop, **common)
        model_fn = _estimator_model_fn(logits_fn, learning_rate, tpu_spec=True)
        est = tpu.TPUEstimator(model_fn, config=config, use_tpu=False, train_batch_size=batch_size)
    elif variant.startswith("keras_estimator"):
        import tfest_kit
        from tfest_kit import keras_bridge

        model = _compiled_keras(keras_fn, steps_per_execution=1)
        loop = per_run if per_run > 1 else None
        config = tfest_kit.run_config(iterations_per_loop=loop, **common)
        est = keras_bridge.to_estimator(model, config=config)
    elif variant.startswith("session"):
        args = (logits_fn, learning_rate, input_fn, warmup, total, batch_size, per_run)
        return _session_throughput(*args)
    else:
        raise ValueError(f"unknown variant {variant!r}; expected one of {TRAINING_VARIANTS}")
    est.train(input_fn, steps=total, hooks=[timer])
    return _rate(timer.times, warmup, total, batch_size, per_run)


def train_op(logits_fn: Callable, learning_rate: float, features, labels):
    """The variants' training step (loss, Adam, global step) in the current graph, no Estimator.

    The same ``model_fn`` the Estimator variants train, so a bare session runs the same graph.
    """
    tf.train.get_or_create_global_step()
    model_fn = _estimator_model_fn(logits_fn, learning_rate, tpu_spec=False)
    return model_fn(features, labels, estimator.ModeKeys.TRAIN).train_op


def _session_throughput(logits_fn, learning_rate, input_fn, warmup, total, batch_size, per_run):
    from tfest_kit._loop import training_loop
    from tfest_kit.config import session_config

    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(0)
        features, labels = tf.data.make_one_shot_iterator(input_fn()).get_next()
        feeds = []
        if per_run > 1:
            tf.train.get_or_create_global_step()
            model_fn = _estimator_model_fn(logits_fn, learning_rate, tpu_spec=False)
            step_fn = lambda x, y: model_fn(x, y, estimator.ModeKeys.TRAIN)  # noqa: E731
            spec, _ = training_loop(step_fn, features, labels, per_run, (None, None), ())
            step_op, feeds = spec.train_op, [graph.get_tensor_by_name("iterations_per_loop:0")]
        else:
            step_op = train_op(logits_fn, learning_rate, features, labels)
        init = tf.global_variables_initializer()
    times = []
    # session_config() with no arguments is the ConfigProto Estimator uses by default.
    with tf.Session(graph=graph, config=session_config()) as session:
        session.run(init)
        step = session.make_callable(step_op, feed_list=feeds)
        for _ in range(total // per_run):
            step(*[per_run] * len(feeds))
            times.append(time.perf_counter())
    return _rate(times, warmup, total, batch_size, per_run)


def _compiled_keras(keras_fn, steps_per_execution: int):
    keras = tf2.keras
    keras.utils.set_random_seed(0)
    model = keras_fn()
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=steps_per_execution,
    )
    return model


def _keras_throughput(keras_fn, features, labels, batch_size, warmup, total, per_run) -> float:
    keras = tf2.keras
    model = _compiled_keras(keras_fn, per_run)
    times = []
    callback = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: times.append(time.perf_counter())
    )
    if isinstance(features, dict):
        (features,) = features.values()
    ds = _dataset(features, labels, batch_size)
    model.fit(ds, epochs=1, steps_per_epoch=total, callbacks=[callback], verbose=0)
    return _rate(times, warmup, total, batch_size, per_run)


def matmul_gflops(size: int = 1024, runs: int = 20) -> float:
    """This machine's float32 matmul rate in GFLOP/s: the fastest of ``runs`` ``size``³ matmuls.

    The fastest, not the median: on a shared machine other processes only ever slow a run
    down, and the figure is meant as the machine's capability.
    """
    graph = tf.Graph()
    with graph.as_default():
        a = tf.random.normal([size, size])
        b = tf.random.normal([size, size])
        a_var, b_var = tf.Variable(a), tf.Variable(b)
        product = tf.matmul(a_var, b_var)
        # Reduce inside the graph so copying the result out is not part of the time.
        done = tf.reduce_sum(product)
        with tf.Session(graph=graph) as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(done)
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                sess.run(done)
                times.append(time.perf_counter() - start)
    return 2 * size**3 / min(times) / 1e9
