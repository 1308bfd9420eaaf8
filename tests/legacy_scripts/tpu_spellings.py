# coding=utf-8
"""A TF 1.15-style TPU script: every spelling of the TPU names, run on a machine without a TPU.

Kept as TF1 code on purpose: tests/test_legacy.py runs it unchanged with
`python -m tfest_kit.legacy tpu_spellings.py --model_dir=...` and reads the JSON line it
prints last.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json

import numpy as np
import tensorflow.compat.v1 as tf
import tensorflow_estimator as tf_estimator
from tensorflow_estimator.python.estimator.tpu import tpu_config
from tensorflow_estimator.python.estimator.tpu import tpu_estimator

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Where checkpoints go.")
flags.DEFINE_bool("use_tpu", True, "Ask for a TPU (there is none: the runner falls back).")

WEIGHTS = np.array([[1.5], [-2.0], [0.5]], dtype=np.float32)


def input_fn(params):
  rng = np.random.RandomState(0)
  x = rng.rand(256, 3).astype(np.float32)
  y = x.dot(WEIGHTS)
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
  return dataset.batch(params["batch_size"], drop_remainder=True)


def model_fn(features, labels, mode, params):
  with tf.tpu.bfloat16_scope():
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
  predictions = tf.matmul(features, w)
  loss = tf.reduce_mean(tf.square(predictions - labels))
  # Summed over the replicas, as a TPU script would before scaling: one replica here.
  loss = tf.tpu.cross_replica_sum(loss)
  loss = tf.tpu.outside_compilation(lambda value: tf.identity(value), loss)
  optimizer = tf.tpu.CrossShardOptimizer(tf.train.GradientDescentOptimizer(0.5))
  train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
  return tf_estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def graph_functions():
  """tf.tpu.rewrite / shard / batch_parallel / initialize_system in a session, as TF1 did."""
  with tf.Graph().as_default(), tf.Session() as sess:
    x = tf.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
    init = tf.tpu.initialize_system()
    (rewritten,) = tf.tpu.rewrite(lambda a: tf.tpu.cross_replica_sum(a * 2.0), [x])
    (sharded,) = tf.tpu.shard(lambda a: a + 1.0, [x], num_shards=2)
    (parallel,) = tf.tpu.batch_parallel(lambda a: tf.reduce_sum(a), [x], num_shards=2)
    replicated = tf.compat.v1.tpu.replicate(lambda a: [a - 1.0], [[x]])
    sess.run(init)
    got = sess.run([rewritten, sharded, parallel, replicated[0][0]])
    sess.run(tf.tpu.shutdown_system())
  return [value.tolist() for value in got]


def main(_):
  run_config = tpu_config.RunConfig(
      model_dir=FLAGS.model_dir,
      tpu_config=tf_estimator.tpu.TPUConfig(iterations_per_loop=10))
  estimator = tpu_estimator.TPUEstimator(
      model_fn=model_fn, config=run_config, use_tpu=FLAGS.use_tpu,
      train_batch_size=32)
  estimator.train(input_fn, max_steps=60)
  print(json.dumps({
      "estimator": type(estimator).__module__,
      "w": estimator.get_variable_value("w").ravel().tolist(),
      "graph_functions": graph_functions(),
  }))


if __name__ == "__main__":
  flags.mark_flag_as_required("model_dir")
  tf.app.run()
