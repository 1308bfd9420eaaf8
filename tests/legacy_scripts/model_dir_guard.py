# coding=utf-8
"""A plain TF1 Estimator script: trains a line, optionally holding training open.

Kept as TF1 code on purpose: tests/test_legacy_runtime.py runs it unchanged with
`python -m tfest_kit.legacy model_dir_guard.py --model_dir=... [--max_steps=N]
[--hold_until=FILE]` and reads the JSON line it prints last: the global step training
restored from and the step it ended at.  With --hold_until it prints "training" once the
session is up, then waits for FILE before its first step.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Where checkpoints go.")
flags.DEFINE_integer("max_steps", 20, "Train to this global step.")
flags.DEFINE_string("hold_until", None, "Wait for this file before the first step.")


class RestoredStep(tf.train.SessionRunHook):
  """Records the global step the session started from; holds if asked."""

  def begin(self):
    self.step = None
    self._global_step = tf.train.get_global_step()

  def after_create_session(self, session, coord):
    self.step = int(session.run(self._global_step))
    if FLAGS.hold_until:
      print("training", flush=True)
      deadline = time.time() + 120
      while not os.path.exists(FLAGS.hold_until) and time.time() < deadline:
        time.sleep(0.1)


def input_fn():
  x = np.random.RandomState(0).rand(64, 2).astype(np.float32)
  y = x.dot([[2.0], [-1.0]]).astype(np.float32)
  return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(8)


def model_fn(features, labels, mode):
  predictions = tf.layers.dense(features["x"], 1)
  loss = tf.losses.mean_squared_error(labels, predictions)
  train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
      loss, tf.train.get_global_step())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(unused_argv):
  config = tf.estimator.RunConfig(
      model_dir=FLAGS.model_dir, save_checkpoints_steps=10, keep_checkpoint_max=5)
  estimator = tf.estimator.Estimator(model_fn, config=config)
  restored = RestoredStep()
  estimator.train(input_fn, hooks=[restored], max_steps=FLAGS.max_steps)
  print(json.dumps({
      "restored_step": restored.step,
      "final_step": int(estimator.get_variable_value("global_step")),
      "is_estimator": isinstance(estimator, tf.estimator.Estimator),
  }))


if __name__ == "__main__":
  tf.app.run()
