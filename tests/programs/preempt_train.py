"""Trains a tiny Estimator with PreemptionHook until SIGTERM; used by tests/test_hooks.py.

Prints ``READY`` once training runs, and at exit ``RESULT preempted=<signal or None>
step=<global step>``. ``argv[1]`` is the model_dir, ``argv[2]`` max_steps.
"""

from __future__ import annotations

import sys

import numpy as np

from tfest_kit import hooks, logs
from tfest_kit._tf import estimator, tf


class _ReadyHook(tf.train.SessionRunHook):
    """Prints READY after a few steps so the test knows when to send the signal."""

    def begin(self):
        self._step = tf.train.get_global_step()
        self._runs = 0

    def after_run(self, run_context, run_values):
        self._runs += 1
        if self._runs == 5:
            print("READY", flush=True)


def model_fn(features, labels, mode):
    w = tf.get_variable("w", [3, 1])
    loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    x = np.random.RandomState(0).normal(size=(64, 3)).astype(np.float32)
    y = x.sum(axis=1, keepdims=True)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8)


def main(argv):
    logs.setup("warning")
    model_dir, max_steps = argv[1], int(argv[2])
    config = estimator.RunConfig(
        model_dir=model_dir, save_checkpoints_steps=100000, log_step_count_steps=None
    )
    est = estimator.Estimator(model_fn, config=config)
    start = est.latest_checkpoint()
    start_step = est.get_variable_value("global_step") if start else 0
    print(f"START step={start_step}", flush=True)
    hook = hooks.PreemptionHook()
    est.train(input_fn, max_steps=max_steps, hooks=[hook, _ReadyHook()])
    step = est.get_variable_value("global_step")
    print(f"RESULT preempted={hook.preempted} step={step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
