"""Trains a tiny tfest_kit TPUEstimator into --model_dir until --stop_file exists.

Prints ``TRAINING pid=N`` once its session runs (it then holds the model_dir's writer lock),
so a test can start a second writer against it, or kill it and take the lock over.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from tfest_kit import logs, tpu
from tfest_kit._tf import tf, tf2


class _WaitForStopFile(tf.train.SessionRunHook):
    def __init__(self, stop_file: str) -> None:
        self._stop_file = stop_file

    def after_create_session(self, session, coord) -> None:
        print(f"TRAINING pid={os.getpid()}", flush=True)

    def after_run(self, run_context, run_values) -> None:
        time.sleep(0.05)
        if os.path.exists(self._stop_file):
            run_context.request_stop()


def model_fn(features, labels, mode, params):
    out = tf.layers.dense(features["x"], 1, name="out")
    loss = tf.losses.mean_squared_error(labels, out)
    step = tf.train.get_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
    return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn(params):
    x = np.ones((16, 2), "float32")
    y = np.ones((16, 1), "float32")
    return tf2.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(params["batch_size"])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--stop_file", required=True)
    args = parser.parse_args()
    logs.setup("warning")
    config = tpu.RunConfig(model_dir=args.model_dir, log_step_count_steps=None)
    est = tpu.TPUEstimator(model_fn, config=config, use_tpu=False, train_batch_size=4)
    est.train(input_fn, max_steps=100000, hooks=[_WaitForStopFile(args.stop_file)])
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
