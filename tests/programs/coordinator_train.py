"""One worker of a ``TF_CONFIG`` cluster training with ``RunConfig(train_distribute=MWMS)``.

What a TF 2.15 program writes: the official ``tf.estimator.train_and_evaluate``, which hands
the run to the distribute coordinator (INDEPENDENT_WORKER mode). Prints ``LOSS before after``
and ``STEP n``. A program of its own: collective ops must be configured before any other op.
"""

from __future__ import annotations

import sys

import numpy as np

import tfest_kit  # noqa: F401  (on TensorFlow >= 2.16: the bridge gives tf.estimator back)

import tensorflow as tf


def _model_fn(features, labels, mode):
    v1 = tf.compat.v1
    w = v1.get_variable("w", [3, 1], initializer=v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
    train_op = v1.train.GradientDescentOptimizer(0.05).minimize(loss, v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn():
    x = np.random.RandomState(0).normal(size=(64, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)


def main(model_dir: str) -> None:
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
    config = tf.estimator.RunConfig(model_dir=model_dir, train_distribute=strategy)
    est = tf.estimator.Estimator(_model_fn, config=config)
    tf.estimator.train_and_evaluate(
        est,
        tf.estimator.TrainSpec(_input_fn, max_steps=40),
        tf.estimator.EvalSpec(_input_fn, steps=2),
    )
    checkpoint = tf.train.latest_checkpoint(model_dir)
    step, w = (tf.train.load_variable(checkpoint, name) for name in ("global_step", "w"))
    x, y = next(iter(_input_fn()))
    print("LOSS", float(np.mean(y.numpy() ** 2)), float(np.mean((x.numpy() @ w - y.numpy()) ** 2)))
    print("STEP", int(step))


if __name__ == "__main__":
    main(sys.argv[1])
