"""Trains a tiny Estimator with ``run_config(threads=(1, INTRA))`` and prints its thread count.

Prints ``THREADS n`` (the process's threads once the training session exists), then builds
a config with the same counts and one with another intra-op count, which can no longer take
effect (its warning goes to stderr). TensorFlow's thread pools are per process, hence a
program of its own.
"""

from __future__ import annotations

import os
import sys

import numpy as np

import tfest_kit
from tfest_kit._tf import estimator, tf, tf2


class _CountThreads(tf.train.SessionRunHook):
    def after_create_session(self, session, coord):
        print(f"THREADS {len(os.listdir('/proc/self/task'))}", flush=True)


def _model_fn(features, labels, mode):
    w = tf.get_variable("w", [4, 1])
    loss = tf.reduce_mean(tf.square(tf.matmul(features["x"], w) - labels))
    step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, step)
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn():
    data = ({"x": np.ones((8, 4), np.float32)}, np.ones((8, 1), np.float32))
    return tf2.data.Dataset.from_tensors(data).repeat(2)


def main(model_dir: str, intra: int) -> None:
    config = tfest_kit.run_config(model_dir=model_dir, threads=(1, intra))
    estimator.Estimator(_model_fn, config=config).train(_input_fn, hooks=[_CountThreads()])
    tfest_kit.run_config(threads=(1, intra))  # the pool's own size: nothing to say
    tfest_kit.run_config(threads=(1, intra + 1))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
