# coding=utf-8
"""A TF1-era seq2seq Estimator (tf.contrib.seq2seq) learning to copy token sequences.

Kept as TF1 code on purpose: tests/test_legacy_seq2seq.py runs it unchanged with
`python -m tfest_kit.legacy seq2seq_model.py --work_dir=...`, reads the JSON line it prints
last and checks it against TF 1.15's variable names and reference computations.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os

import numpy as np
import tensorflow as tf

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", None, "A scratch directory.")
flags.DEFINE_string("tf115_dir", None, "A model_dir holding a checkpoint with TF 1.15's names.")
flags.DEFINE_integer("train_steps", 200, "Training steps.")
flags.DEFINE_float("learning_rate", 0.01, "Adam's learning rate.")
flags.DEFINE_float("max_gradient_norm", 1.0, "Clip gradients to this global norm.")

PAD, GO, EOS = 0, 1, 2
VOCAB, EMBED, UNITS, MAX_LEN, BEAM = 10, 8, 16, 5, 3


def make_data(n, seed):
  rng = np.random.RandomState(seed)
  lengths = rng.randint(3, MAX_LEN + 1, size=n).astype(np.int32)
  source = np.zeros((n, MAX_LEN), np.int32)
  target = np.zeros((n, MAX_LEN + 1), np.int32)
  for i, length in enumerate(lengths):
    tokens = rng.randint(3, VOCAB, size=length)
    source[i, :length] = tokens
    target[i, :length] = tokens
    target[i, length] = EOS
  return {"source": source, "source_length": lengths}, target


def input_fn(features, target, batch_size, repeat):
  def fn():
    data = tf.data.Dataset.from_tensor_slices((features, target))
    if repeat:
      data = data.shuffle(1000, seed=1).repeat()
    return data.batch(batch_size)
  return fn


def pad_to(ids, length):
  ids = ids[:, :length]
  return tf.pad(ids, [[0, 0], [0, length - tf.shape(ids)[1]]], constant_values=PAD)


def model_fn(features, labels, mode, params):
  source = features["source"]
  source_length = features["source_length"]
  batch_size = tf.shape(source)[0]
  source_embedded = tf.contrib.layers.embed_sequence(source, VOCAB, EMBED, scope="embed")
  with tf.variable_scope("embed", reuse=True):
    embeddings = tf.get_variable("embeddings")
  encoder_outputs, encoder_state = tf.nn.dynamic_rnn(
      tf.contrib.rnn.GRUCell(UNITS), source_embedded, sequence_length=source_length,
      dtype=tf.float32)

  def decode(helper=None, beam_width=None, reuse=None):
    with tf.variable_scope("decode", reuse=reuse):
      memory, memory_length, state = encoder_outputs, source_length, encoder_state
      batch = batch_size
      if beam_width:
        memory = tf.contrib.seq2seq.tile_batch(memory, multiplier=beam_width)
        memory_length = tf.contrib.seq2seq.tile_batch(memory_length, multiplier=beam_width)
        state = tf.contrib.seq2seq.tile_batch(state, multiplier=beam_width)
        batch = batch_size * beam_width
      attention = tf.contrib.seq2seq.BahdanauAttention(
          UNITS, memory, memory_sequence_length=memory_length)
      cell = tf.contrib.seq2seq.AttentionWrapper(
          tf.nn.rnn_cell.BasicLSTMCell(UNITS), attention, attention_layer_size=UNITS)
      initial_state = cell.zero_state(batch, tf.float32).clone(
          cell_state=tf.nn.rnn_cell.LSTMStateTuple(state, state))
      projection = tf.layers.Dense(VOCAB)
      if beam_width:
        decoder = tf.contrib.seq2seq.BeamSearchDecoder(
            cell, embeddings, tf.fill([batch_size], GO), EOS, initial_state,
            beam_width=beam_width, output_layer=projection)
        outputs, _, _ = tf.contrib.seq2seq.dynamic_decode(
            decoder, maximum_iterations=MAX_LEN + 1)
        return outputs.predicted_ids[:, :, 0]
      decoder = tf.contrib.seq2seq.BasicDecoder(cell, helper, initial_state, projection)
      impute = isinstance(helper, tf.contrib.seq2seq.TrainingHelper)
      outputs, _, _ = tf.contrib.seq2seq.dynamic_decode(
          decoder, impute_finished=impute, maximum_iterations=MAX_LEN + 1)
      return outputs

  if mode == tf.estimator.ModeKeys.PREDICT:
    greedy = decode(tf.contrib.seq2seq.GreedyEmbeddingHelper(
        embeddings, tf.fill([batch_size], GO), EOS)).sample_id
    predictions = {
        "greedy": pad_to(greedy, MAX_LEN + 1),
        "beam": pad_to(decode(beam_width=BEAM, reuse=True), MAX_LEN + 1),
        "beam1": pad_to(decode(beam_width=1, reuse=True), MAX_LEN + 1),
    }
    return tf.estimator.EstimatorSpec(mode, predictions=predictions)

  target_length = tf.reduce_sum(tf.cast(tf.not_equal(labels, PAD), tf.int32), 1)
  decoder_inputs = tf.concat([tf.fill([batch_size, 1], GO), labels[:, :-1]], 1)
  helper = tf.contrib.seq2seq.TrainingHelper(
      tf.nn.embedding_lookup(embeddings, decoder_inputs), target_length)
  logits = decode(helper).rnn_output
  steps = tf.shape(logits)[1]
  weights = tf.sequence_mask(target_length, steps, dtype=tf.float32)
  loss = tf.contrib.seq2seq.sequence_loss(logits, labels[:, :steps], weights)
  optimizer = tf.train.AdamOptimizer(FLAGS.learning_rate)
  gradients, variables = zip(*optimizer.compute_gradients(loss))
  # Clipped by their global norm, as TF1 seq2seq code did (tensorflow/nmt's max_gradient_norm):
  # unclipped, Adam at 0.02 diverged on this task in about one run in seven.
  gradients, _ = tf.clip_by_global_norm(gradients, FLAGS.max_gradient_norm)
  train_op = optimizer.apply_gradients(
      zip(gradients, variables), global_step=tf.train.get_global_step())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def predict(estimator, features, target, checkpoint_path=None):
  rows = list(estimator.predict(input_fn(features, target, 50, False),
                                checkpoint_path=checkpoint_path))
  return {key: [row[key].tolist() for row in rows] for key in ("greedy", "beam", "beam1")}


def estimator_section():
  train_x, train_y = make_data(2000, 0)
  test_x, test_y = make_data(50, 1)
  config = tf.estimator.RunConfig(tf_random_seed=7,
                                  log_step_count_steps=50)
  model_dir = os.path.join(FLAGS.work_dir, "model")
  estimator = tf.estimator.Estimator(model_fn, model_dir, config)
  losses = []
  for steps in (FLAGS.train_steps // 5, FLAGS.train_steps - FLAGS.train_steps // 5):
    estimator.train(input_fn(train_x, train_y, 32, True), steps=steps)
    losses.append(float(estimator.evaluate(
        input_fn(test_x, test_y, 50, False), steps=1, name="held_out")["loss"]))
  result = {"losses": losses, "target": test_y.tolist(),
            "variables": tf.train.list_variables(estimator.latest_checkpoint()),
            "trained": predict(estimator, test_x, test_y)}
  if FLAGS.tf115_dir:
    tf115 = tf.estimator.Estimator(model_fn, FLAGS.tf115_dir, config)
    result["tf115"] = predict(tf115, test_x, test_y)
  return result


def reference_section():
  """One attention step, and BasicDecoder against dynamic_rnn, on fixed inputs."""
  rng = np.random.RandomState(3)
  memory = rng.randn(2, 4, 6).astype(np.float32)
  query_inputs = rng.randn(2, 3, 5).astype(np.float32)
  result = {"memory": memory.tolist(), "inputs": query_inputs.tolist()}
  for kind in ("bahdanau", "luong", "bahdanau_norm", "luong_scaled"):
    with tf.Graph().as_default(), tf.Session() as sess:
      tf.set_random_seed(1)
      if kind.startswith("bahdanau"):
        mechanism = tf.contrib.seq2seq.BahdanauAttention(
            6, memory, memory_sequence_length=[4, 2], normalize=kind.endswith("norm"))
      else:
        mechanism = tf.contrib.seq2seq.LuongAttention(
            6, memory, memory_sequence_length=[4, 2], scale=kind.endswith("scaled"))
      cell = tf.contrib.seq2seq.AttentionWrapper(
          tf.nn.rnn_cell.GRUCell(6), mechanism, alignment_history=True)
      outputs, state = tf.nn.dynamic_rnn(
          cell, query_inputs, initial_state=cell.zero_state(2, tf.float32), dtype=tf.float32)
      sess.run(tf.global_variables_initializer())
      values = sess.run({"outputs": outputs, "alignments": state.alignment_history.stack()})
      variables = {v.op.name: sess.run(v).tolist() for v in tf.global_variables()}
      result[kind] = {"outputs": values["outputs"].tolist(),
                      "alignments": values["alignments"].tolist(), "variables": variables}
  with tf.Graph().as_default(), tf.Session() as sess:
    tf.set_random_seed(1)
    cell = tf.nn.rnn_cell.BasicLSTMCell(6)
    helper = tf.contrib.seq2seq.TrainingHelper(query_inputs, [3, 2])
    decoder = tf.contrib.seq2seq.BasicDecoder(cell, helper, cell.zero_state(2, tf.float32))
    outputs, state, lengths = tf.contrib.seq2seq.dynamic_decode(decoder, impute_finished=True)
    reference, reference_state = tf.nn.dynamic_rnn(
        cell, query_inputs, sequence_length=[3, 2], dtype=tf.float32)
    sess.run(tf.global_variables_initializer())
    values = sess.run({"decoded": outputs.rnn_output, "lengths": lengths,
                       "reference": reference, "h": state.h, "reference_h": reference_state.h})
    result["basic_decoder"] = {key: value.tolist() for key, value in values.items()}
    result["basic_decoder"]["variables"] = [v.op.name for v in tf.global_variables()]
  return result


def main(_):
  print(json.dumps({"reference": reference_section(), "estimator": estimator_section()}))


if __name__ == "__main__":
  flags.mark_flag_as_required("work_dir")
  tf.app.run()
