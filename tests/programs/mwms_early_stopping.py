"""Resumes a model_dir with ``early_stopping`` under a one-worker MultiWorkerMirroredStrategy.

Prints ``STEPS before after`` and ``FLAG_IN_CHECKPOINT yes|no``. Trains 10 steps without early
stopping, then resumes to ``max_steps=200`` with it, over flat eval results, so it must stop
early. A program of its own: collective ops must be configured before any other op runs, so
the strategy cannot be created inside the test process.
"""

from __future__ import annotations

import sys

import numpy as np

from tfest_kit import hooks
from tfest_kit._tf import estimator, tf, tf2


def _model_fn(features, labels, mode):
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn():
    x = np.random.RandomState(0).normal(size=(64, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)


def main(model_dir: str) -> None:
    strategy = tf2.distribute.experimental.MultiWorkerMirroredStrategy()
    config = estimator.RunConfig(
        model_dir=model_dir, train_distribute=strategy, log_step_count_steps=None
    )
    est = estimator.Estimator(_model_fn, config=config)
    try:
        hooks.early_stopping(est, "loss", patience_steps=5)
    except ValueError as e:
        print(f"NO_INTERVAL {e}", flush=True)
    est.train(_input_fn, max_steps=10)
    before = est.get_variable_value("global_step")
    with tf.Graph().as_default():
        writer = tf.summary.FileWriter(est.eval_dir())
        for step in (0, 5, 10):
            writer.add_summary(
                tf.Summary(value=[tf.Summary.Value(tag="loss", simple_value=1.0)]), step
            )
        writer.close()
    hook = hooks.early_stopping(est, "loss", patience_steps=5, run_every_steps=1)
    est.train(_input_fn, max_steps=200, hooks=[hook])
    print(f"STEPS {before} {est.get_variable_value('global_step')}", flush=True)
    names = [name for name, _ in tf.train.list_variables(model_dir)]
    in_checkpoint = any("signal_early_stopping" in name for name in names)
    print(f"FLAG_IN_CHECKPOINT {'yes' if in_checkpoint else 'no'}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
