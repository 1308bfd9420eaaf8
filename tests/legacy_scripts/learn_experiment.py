# coding=utf-8
"""A 2017-style Estimator program: tf.contrib.learn.Experiment run by learn_runner.

Kept as TF1 code on purpose: tests/test_legacy_learn.py runs it unchanged with
`python -m tfest_kit.legacy learn_experiment.py MODEL_DIR SCHEDULE [VARIANT]`, SCHEDULE being
an Experiment method (train_and_evaluate, train, evaluate, test, continuous_train_and_eval,
or a wrong name), VARIANT one of
  plain        a ValidationMonitor every 50 steps (min_eval_frequency), one export strategy
  early_stop   a ValidationMonitor of the script's own in train_monitors, stopping early
  no_hparams   learn_runner.run without hparams, with the older output_dir signature
The last line printed is a JSON summary.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import sys

import numpy as np
import tensorflow as tf
from tensorflow.contrib.learn.python.learn import learn_runner

tf.logging.set_verbosity(tf.logging.INFO)
MODEL_DIR, SCHEDULE = sys.argv[1], sys.argv[2]
VARIANT = sys.argv[3] if len(sys.argv) > 3 else "plain"

rng = np.random.RandomState(0)
FEATURES = rng.rand(256, 4).astype(np.float32)
LABELS = (FEATURES.sum(axis=1) > 2).astype(np.int64)


def model_fn(features, labels, mode, params):
  logits = tf.layers.dense(features["x"], 2)
  predictions = tf.argmax(logits, 1)
  if mode == tf.estimator.ModeKeys.PREDICT:
    return tf.estimator.EstimatorSpec(mode, predictions={"class": predictions})
  loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
  optimizer = tf.train.GradientDescentOptimizer(params.learning_rate)
  train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
  metrics = {"accuracy": tf.metrics.accuracy(labels, predictions)}
  return tf.estimator.EstimatorSpec(
      mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def train_input_fn():
  dataset = tf.data.Dataset.from_tensor_slices(({"x": FEATURES}, LABELS))
  return dataset.repeat().batch(32)


def eval_input_fn():
  return tf.data.Dataset.from_tensor_slices(({"x": FEATURES}, LABELS)).batch(64)


def serving_input_fn():
  inputs = {"x": tf.placeholder(tf.float32, [None, 4])}
  return tf.estimator.export.ServingInputReceiver(inputs, inputs)


def experiment(estimator, **kwargs):
  strategy = tf.contrib.learn.make_export_strategy(
      serving_input_fn, exports_to_keep=2)
  return tf.contrib.learn.Experiment(
      estimator=estimator,
      train_input_fn=train_input_fn,
      eval_input_fn=eval_input_fn,
      train_steps=200,
      eval_steps=None,
      eval_delay_secs=0,
      export_strategies=[strategy],
      **kwargs)


MONITORS = []


def experiment_fn(run_config, params):
  estimator = tf.estimator.Estimator(
      model_fn=model_fn, params=params, config=run_config)
  if VARIANT == "early_stop":
    # Accuracy never falls, so watched as a loss it stops improving at once.
    monitor = tf.contrib.learn.monitors.ValidationMonitor(
        input_fn=eval_input_fn, every_n_steps=10, early_stopping_rounds=30,
        early_stopping_metric="accuracy", check_interval_secs=0)
    MONITORS.append(monitor)
    return experiment(estimator, train_monitors=[monitor], min_eval_frequency=0)
  return experiment(estimator, min_eval_frequency=50,
                    train_steps_per_iteration=100)


def output_dir_experiment_fn(output_dir):
  params = tf.contrib.training.HParams(learning_rate=0.5)
  estimator = tf.estimator.Estimator(
      model_fn=model_fn, model_dir=output_dir, params=params)
  return experiment(estimator)


def main():
  if VARIANT == "no_hparams":
    result = learn_runner.run(output_dir_experiment_fn, output_dir=MODEL_DIR,
                              schedule=SCHEDULE)
  else:
    save_steps = 10 if VARIANT == "early_stop" else 100
    run_config = tf.contrib.learn.RunConfig(
        model_dir=MODEL_DIR, save_checkpoints_steps=save_steps,
        tf_random_seed=1)
    result = learn_runner.run(
        experiment_fn=experiment_fn,
        run_config=run_config,
        schedule=SCHEDULE,
        hparams=tf.contrib.training.HParams(learning_rate=0.5))
  if isinstance(result, tuple):  # train_and_evaluate's (metrics, exports)
    metrics, exports = result
    exports = [path.decode() for path in exports]
  elif isinstance(result, dict):
    metrics, exports = result, []
  else:  # train's Estimator
    metrics, exports = {}, []
  summary = {
      "metrics": {k: float(v) for k, v in metrics.items()},
      "exports": exports,
      "early_stopped": [m.early_stopped for m in MONITORS],
      "best_step": [int(m.best_step) for m in MONITORS],
  }
  print(json.dumps(summary))


if __name__ == "__main__":
  main()
