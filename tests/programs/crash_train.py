"""A tiny Estimator that trains slowly enough to be killed mid-way; used by the fault tests.

Prints ``START step=N`` once the session exists (the global step it resumed from) and
``STEP N`` after every step (the global step reached), so a test can tell how far it got.

Flags: --model_dir, --max_steps, --save_steps, --step_sleep (seconds per step), --preemption
(add tfest_kit.hooks.PreemptionHook and exit 0 with ``PREEMPTED step=N`` when it fired).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from tfest_kit import logs
from tfest_kit._tf import estimator, tf, tf2


class _StepPrinter(tf.train.SessionRunHook):
    def __init__(self, step_sleep: float) -> None:
        self._step_sleep = step_sleep

    def begin(self) -> None:
        self._global_step = tf.train.get_global_step()

    def after_create_session(self, session, coord) -> None:
        print(f"START step={int(session.run(self._global_step))}", flush=True)

    def after_run(self, run_context, run_values) -> None:
        print(f"STEP {int(run_context.session.run(self._global_step))}", flush=True)
        time.sleep(self._step_sleep)


def model_fn(features, labels, mode):
    hidden = tf.layers.dense(features["x"], 8, activation=tf.nn.relu, name="hidden")
    predictions = tf.layers.dense(hidden, 1, name="out")
    loss = tf.losses.mean_squared_error(labels, predictions)
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=tf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    rng = np.random.RandomState(0)
    x = rng.randn(128, 4).astype("float32")
    y = x.sum(axis=1, keepdims=True).astype("float32")
    return tf2.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(8)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--max_steps", type=int, default=200)
    parser.add_argument("--save_steps", type=int, default=10)
    parser.add_argument("--step_sleep", type=float, default=0.005)
    parser.add_argument("--preemption", action="store_true")
    args = parser.parse_args()
    logs.setup("warning")
    config = estimator.RunConfig(
        model_dir=args.model_dir,
        save_checkpoints_steps=args.save_steps,
        keep_checkpoint_max=5,
        log_step_count_steps=None,
    )
    est = estimator.Estimator(model_fn, config=config)
    train_hooks = [_StepPrinter(args.step_sleep)]
    preemption = None
    if args.preemption:
        from tfest_kit import hooks

        preemption = hooks.PreemptionHook()
        train_hooks.append(preemption)
    est.train(input_fn, max_steps=args.max_steps, hooks=train_hooks)
    step = est.get_variable_value("global_step")
    if preemption is not None and preemption.preempted:
        print(f"PREEMPTED step={step}", flush=True)
        return 0
    print(f"DONE step={step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
