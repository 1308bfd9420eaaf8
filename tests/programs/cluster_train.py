"""A tiny Estimator trained with tfest_kit.train_and_evaluate; runs as every task of a test cluster.

Uses early stopping and the best exporter.  Prints ``VARIABLE_DEVICE name device`` per trainable
variable (where the variables were placed), ``JOINED`` once a training session exists and
``RESULT {json}`` at the end.  The chief waits (bounded) at step ``--wait_at`` until worker 0
has joined, so that both really train together however slow the machine is.  Every task
stops training once ``--stop_file`` exists (tests end long runs that way). The task of type
``--crash_task`` fails at start; that of ``--kill_task`` kills itself with SIGKILL once the
first checkpoint exists (the launcher's fault tests).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

import numpy as np

import tfest_kit
from tfest_kit import cluster, hooks, logs, serving
from tfest_kit._tf import estimator, tf, tf2


def model_fn(features, labels, mode, params):
    x = features["x"]
    w = tf.get_variable("w", [4, 1], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
    predictions = tf.matmul(x, w) + b
    if mode == estimator.ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions={"y": predictions})
    loss = tf.losses.mean_squared_error(labels, predictions)
    if mode == estimator.ModeKeys.TRAIN:
        for var in tf.trainable_variables():
            print(f"VARIABLE_DEVICE {var.op.name} {var.device or '(none)'}", flush=True)
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=tf.train.get_global_step()
    )
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn(params=None):
    rng = np.random.RandomState(0)
    x = rng.randn(256, 4).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32") + 0.1).astype("float32")
    return tf2.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(16)


def eval_input_fn(params=None):
    return input_fn(params).take(4)


class _Pace(tf.train.SessionRunHook):
    """Slows steps down; on the chief, waits at one step for worker 0 to join."""

    def __init__(self, marker, is_chief, wait_at, step_sleep, stop_file, fail_at) -> None:
        self._marker, self._is_chief = marker, is_chief
        self._wait_at, self._step_sleep = wait_at, step_sleep
        self._stop_file, self._fail_at = stop_file, fail_at

    def begin(self) -> None:
        self._global_step = tf.train.get_global_step()

    def after_create_session(self, session, coord) -> None:
        print("JOINED", flush=True)
        if not self._is_chief:
            open(self._marker, "w").close()

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values) -> None:
        step = run_values.results
        if not self._is_chief and step == self._fail_at:  # as a lost connection would
            self._fail_at = None
            raise tf.errors.UnavailableError(None, None, f"--fail_worker_at={step}")
        if self._is_chief and step == self._wait_at:
            deadline = time.monotonic() + 120
            while not os.path.exists(self._marker) and time.monotonic() < deadline:
                time.sleep(0.1)
            print(f"WORKER_SEEN {os.path.exists(self._marker)} at step {step}", flush=True)
        time.sleep(self._step_sleep)
        if self._stop_file and os.path.exists(self._stop_file):
            print(f"STOP_FILE seen at step {step}", flush=True)
            run_context.request_stop()


def _kill_after_first_checkpoint(model_dir: str) -> None:
    while not tf.train.latest_checkpoint(model_dir):
        time.sleep(0.1)
    print("KILLING myself", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--strategy", choices=["none", "mwms"], default="none")
    parser.add_argument("--max_steps", type=int, default=100000)
    parser.add_argument("--save_steps", type=int, default=10)
    parser.add_argument("--step_sleep", type=float, default=0.01)
    parser.add_argument("--wait_at", type=int, default=5)
    parser.add_argument("--patience_steps", type=int, default=40)
    parser.add_argument("--stop_file", default=None)
    parser.add_argument("--crash_task", default=None)
    parser.add_argument("--kill_task", default=None)
    parser.add_argument("--fail_worker_at", type=int, default=None)  # a step: one failed run
    parser.add_argument("--preemption", action="store_true")  # a PreemptionHook on each task
    args = parser.parse_args()
    logs.setup("info")
    task = cluster.validate_tf_config().get("task", {})
    if args.crash_task and task.get("type") == args.crash_task:
        raise SystemExit(f"--crash_task={args.crash_task}: crashing at start")
    if args.kill_task and task.get("type") == args.kill_task:
        threading.Thread(
            target=_kill_after_first_checkpoint, args=[args.model_dir], daemon=True
        ).start()
    distribute = cluster.multi_worker_strategy() if args.strategy == "mwms" else None
    config = estimator.RunConfig(
        model_dir=args.model_dir,
        save_checkpoints_steps=args.save_steps,
        # The evaluator exports from the checkpoint it evaluated; with the default of 5 kept
        # and a save every few steps the chief may already have deleted it ("not a valid
        # checkpoint" on the evaluator).
        keep_checkpoint_max=100,
        train_distribute=distribute,
        log_step_count_steps=20,
    )
    est = estimator.Estimator(model_fn, config=config)
    is_chief = task.get("type", "chief") == "chief"
    marker = os.path.join(args.model_dir, "worker0-joined")
    pace = _Pace(
        marker, is_chief, args.wait_at, args.step_sleep, args.stop_file, args.fail_worker_at
    )
    # min_delta so large that no evaluation counts as an improvement: early stopping must end
    # training once evaluations span `patience_steps`, long before max_steps.
    stopper = hooks.early_stopping(
        est, "loss", min_delta=1e9, patience_steps=args.patience_steps, run_every_steps=5
    )
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    metrics = tfest_kit.train_and_evaluate(
        est,
        input_fn,
        eval_input_fn,
        max_steps=args.max_steps,
        hooks=[pace, stopper, *([hooks.PreemptionHook()] if args.preemption else [])],
        exporters=[
            serving.best_exporter(receiver, monitor="loss", mode="min"),
            # Never exported at all after an early stop before tfest_kit asked it again.
            estimator.FinalExporter("final", receiver),
        ],
        throttle_secs=1,
        start_delay_secs=0,
    )
    print("RESULT " + json.dumps({"task": task, "metrics": metrics}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
