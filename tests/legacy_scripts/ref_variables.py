# coding=utf-8
"""TF1 variable code that relies on reference variables, as TF 1.15 made them.

Kept as TF1 code on purpose: tests/test_legacy_runtime.py runs it unchanged with
`python -m tfest_kit.legacy ref_variables.py MODEL_DIR` and reads the JSON line it prints last.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import sys

import numpy as np
import tensorflow as tf

MODEL_DIR = sys.argv[1]
result = {}

with tf.Graph().as_default(), tf.Session() as sess:
  with tf.variable_scope("model"):
    w = tf.get_variable("w", initializer=tf.constant([1.0, 2.0]))
    asked = tf.get_variable("asked", [2], use_resource=True)
  plain = tf.Variable(3.0, name="plain")
  # initialized_value(): TF2's resource variables raise NotImplementedError.
  doubled = tf.Variable(w.initialized_value() * 2.0, name="doubled")
  assign = tf.assign(w, [5.0, 6.0])
  sess.run(tf.global_variables_initializer())
  result["types"] = {
      "get_variable": type(w).__name__,
      "use_resource=True": type(asked).__name__,
      "Variable": type(plain).__name__,
  }
  result["doubled"] = sess.run(doubled).tolist()
  result["assigned"] = sess.run(assign).tolist()

  # Gradient accumulation, as TF1 helpers wrote it: zeroed, summed over micro-batches,
  # applied once.
  x = tf.placeholder(tf.float32, [None, 2])
  with tf.variable_scope("acc"):
    v = tf.get_variable("v", initializer=tf.constant([0.0, 0.0]))
  loss = tf.reduce_sum(tf.square(tf.reduce_sum(x * v, axis=1) - 1.0))
  optimizer = tf.train.GradientDescentOptimizer(0.1)
  grads_and_vars = optimizer.compute_gradients(loss, [v])
  accumulators = [
      tf.Variable(tf.zeros_like(var.initialized_value()), trainable=False)
      for _, var in grads_and_vars]
  zero = [a.assign(tf.zeros_like(a)) for a in accumulators]
  accumulate = [a.assign_add(g) for a, (g, _) in zip(accumulators, grads_and_vars)]
  apply = optimizer.apply_gradients(
      [(a / 2.0, var) for a, (_, var) in zip(accumulators, grads_and_vars)])
  sess.run(tf.variables_initializer([v] + accumulators))
  sess.run(zero)
  for batch in ([[1.0, 0.0]], [[0.0, 1.0]]):
    sess.run(accumulate, {x: batch})
  sess.run(apply)
  result["accumulated"] = sess.run(v).tolist()

with tf.Graph().as_default():
  tf.enable_resource_variables()
  result["after_enable_resource_variables"] = type(tf.get_variable("r", [1])).__name__
  tf.disable_resource_variables()


def seeded_kernels():
  # A graph seed makes the layers' default initializers repeat, as in TF 1.x.
  with tf.Graph().as_default():
    tf.set_random_seed(1)
    dense = tf.layers.dense(tf.ones([1, 3]), 2)
    conv = tf.layers.conv2d(tf.ones([1, 4, 4, 1]), 2, 3)
    keras = tf.keras.layers.Dense(2)(tf.ones([1, 3]))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return [sess.run(v).tolist() for v in tf.trainable_variables() if "kernel" in v.name]


result["seeded_kernels_repeat"] = seeded_kernels() == seeded_kernels()


def model_fn(features, labels, mode):
  hidden = tf.layers.dense(features, 3, name="hidden")
  with tf.variable_scope("out"):
    w = tf.get_variable("w", [3, 1])
  loss = tf.losses.mean_squared_error(labels, tf.matmul(hidden, w))
  ema = tf.train.ExponentialMovingAverage(0.9)
  result["model_fn_types"] = sorted({type(v).__name__ for v in tf.trainable_variables()})
  train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
  with tf.control_dependencies([train_op]):
    train_op = ema.apply(tf.trainable_variables())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
  x = np.random.RandomState(0).rand(16, 2).astype(np.float32)
  return tf.data.Dataset.from_tensor_slices((x, x[:, :1])).repeat().batch(4)


estimator = tf.estimator.Estimator(model_fn, model_dir=MODEL_DIR)
estimator.train(input_fn, max_steps=3)
result["checkpoint"] = sorted(name for name, _ in tf.train.list_variables(MODEL_DIR))
print(json.dumps(result))
