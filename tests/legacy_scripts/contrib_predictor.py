# coding=utf-8
"""A TF1-era serving script: train, export with a BERT-style receiver, serve with tf.contrib.predictor.

Kept as TF1 code on purpose: tests/test_legacy.py runs it unchanged with
`python -m tfest_kit.legacy contrib_predictor.py --model_dir=...` and reads the JSON line it
prints last.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os

import numpy as np
import tensorflow as tf
from tensorflow.contrib import predictor

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Where checkpoints and the export go.")

SEQ = 5


def model_fn(features, labels, mode, params):
  embeddings = tf.get_variable("embeddings", [20, 4])
  pooled = tf.reduce_mean(tf.nn.embedding_lookup(embeddings, features["input_ids"]), axis=1)
  logits = tf.layers.dense(pooled, 2, name="logits")
  probabilities = tf.nn.softmax(logits)
  if mode == tf.estimator.ModeKeys.PREDICT:
    return tf.estimator.EstimatorSpec(
        mode, predictions={"probabilities": probabilities, "logits": logits})
  loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = tf.train.AdamOptimizer(0.05).minimize(
      loss, global_step=tf.train.get_global_step())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def serving_input_receiver_fn():
  # As BERT's export scripts wrote it: label_ids is a placeholder the outputs never read.
  receiver = {
      "input_ids": tf.placeholder(tf.int32, [None, SEQ], name="input_ids"),
      "label_ids": tf.placeholder(tf.int32, [None], name="label_ids"),
  }
  return tf.estimator.export.ServingInputReceiver(receiver, receiver)


def main(_):
  rng = np.random.RandomState(0)
  ids = rng.randint(0, 20, (64, SEQ)).astype(np.int32)
  labels = (ids[:, 0] < 10).astype(np.int32)
  estimator = tf.estimator.Estimator(model_fn, model_dir=FLAGS.model_dir)
  estimator.train(
      lambda: tf.data.Dataset.from_tensor_slices(({"input_ids": ids}, labels)).repeat().batch(16),
      steps=20)
  export_dir = estimator.export_saved_model(
      os.path.join(FLAGS.model_dir, "export"), serving_input_receiver_fn)
  reference = np.stack([
      p["probabilities"] for p in estimator.predict(
          lambda: tf.data.Dataset.from_tensor_slices({"input_ids": ids[:8]}).batch(8))
  ])
  from_saved = predictor.from_saved_model(export_dir)
  from_estimator = tf.contrib.predictor.from_estimator(
      estimator, serving_input_receiver_fn)
  unexpected = None
  try:
    from_saved({"input_ids": ids[:8], "labels": labels[:8]})
  except ValueError as e:
    unexpected = str(e)
  print(json.dumps({
      "export_dir": export_dir.decode(),
      "reference": reference.tolist(),
      "without_label_ids": from_saved({"input_ids": ids[:8]})["probabilities"].tolist(),
      "label_ids_none": from_saved(
          {"input_ids": ids[:8], "label_ids": None})["probabilities"].tolist(),
      "from_estimator": from_estimator({"input_ids": ids[:8]})["probabilities"].tolist(),
      "feed_tensors": sorted(from_saved.feed_tensors),
      "unexpected": unexpected,
  }))


if __name__ == "__main__":
  flags.mark_flag_as_required("model_dir")
  tf.app.run()
