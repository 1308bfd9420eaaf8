# coding=utf-8
"""A TF1 training script that sets its log level one of three TF1 ways, or not at all.

Kept as TF1 code on purpose: tests/test_legacy_runtime.py runs it unchanged with
`python -m tfest_kit.legacy loss_lines.py HOW MODEL_DIR`, HOW being
  absl  absl.logging.set_verbosity(INFO), then absl.app.run, as tensorflow/tpu's
        mnist_tpu.py does; trains a TPUEstimator (no TPU here: the fallback)
  tf    tf.logging.set_verbosity(tf.logging.INFO) in main(), as BERT does; a plain Estimator
  none  sets nothing and calls main() itself; a TPUEstimator
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import sys

from absl import app
from absl import logging as absl_logging
import numpy as np
import tensorflow as tf

HOW, MODEL_DIR = sys.argv[1], sys.argv[2]


def input_fn(params):
  x = np.random.RandomState(0).rand(64, 2).astype(np.float32)
  y = x.sum(axis=1, keepdims=True)
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
  return dataset.batch(params.get("batch_size", 8), drop_remainder=True)


def model_fn(features, labels, mode, params):
  predictions = tf.layers.dense(features, 1)
  loss = tf.losses.mean_squared_error(labels, predictions)
  optimizer = tf.train.GradientDescentOptimizer(0.1)
  if HOW == "tf":
    train_op = optimizer.minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
  optimizer = tf.contrib.tpu.CrossShardOptimizer(optimizer)
  train_op = optimizer.minimize(loss, tf.train.get_global_step())
  return tf.contrib.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def main(unused_argv):
  if HOW == "tf":
    tf.logging.set_verbosity(tf.logging.INFO)
    config = tf.estimator.RunConfig(model_dir=MODEL_DIR, log_step_count_steps=10)
    estimator = tf.estimator.Estimator(model_fn, config=config, params={})
  else:
    config = tf.contrib.tpu.RunConfig(model_dir=MODEL_DIR, log_step_count_steps=10)
    estimator = tf.contrib.tpu.TPUEstimator(
        model_fn, config=config, use_tpu=False, train_batch_size=8)
  estimator.train(input_fn, max_steps=30)
  print("trained to step", estimator.get_variable_value("global_step"))


if __name__ == "__main__":
  if HOW == "absl":
    absl_logging.set_verbosity(absl_logging.INFO)
    app.run(main, argv=sys.argv[:1])
  else:
    main(sys.argv)
