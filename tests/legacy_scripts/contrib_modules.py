# coding=utf-8
"""TF1-era uses of tf.contrib.{training, metrics, losses, lookup, rnn, framework, estimator, …}.

Kept as TF1 code on purpose: tests/test_legacy.py runs it unchanged with
`python -m tfest_kit.legacy contrib_modules.py --work_dir=...`, reads the JSON line it prints
last and compares each value with the same computation written against TensorFlow 2.15.
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
flags.DEFINE_string("hparams", "learning_rate=0.5,layers=[8,4],use_bias=false",
                    "HParams overrides, as TF1 scripts took them.")

PREDICTIONS = np.array([0.1, 0.8, 0.6, 0.3, 0.9, 0.2], np.float32)
LABELS = np.array([0, 1, 0, 0, 1, 1], np.int64)
SCORES = np.array([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2], [0.2, 0.2, 0.6]], np.float32)
CLASSES = np.array([1, 2, 2], np.int64)


def training_section():
  hparams = tf.contrib.training.HParams(
      learning_rate=0.1, layers=[16, 8], use_bias=True, optimizer="adam")
  hparams.parse(FLAGS.hparams)
  hparams.add_hparam("dropout", 0.1)
  hparams.set_hparam("dropout", 0)  # an int for a float hparam: cast, as TF 1.15 did
  hparams.override_from_dict({"optimizer": "sgd"})
  restored = tf.contrib.training.HParams(
      learning_rate=0.0, layers=[0], use_bias=True, optimizer="", dropout=1.0)
  restored.parse_json(hparams.to_json())
  errors = []
  for bad in ("learning_rate=abc", "nope=1", "layers=3"):
    try:
      hparams.parse(bad)
    except ValueError as e:
      errors.append(type(e).__name__)
  return {"values": hparams.values(), "json_round_trip": restored.values(),
          "str": str(hparams), "errors": errors,
          "dropout_type": type(hparams.dropout).__name__}


def metrics_section():
  with tf.Graph().as_default(), tf.Session() as sess:
    predictions = tf.constant(PREDICTIONS)
    labels = tf.constant(LABELS)
    hard = tf.cast(predictions > 0.5, tf.int64)
    names_to_tuples = {
        "accuracy": tf.contrib.metrics.streaming_accuracy(hard, labels),
        "auc": tf.contrib.metrics.streaming_auc(predictions, labels),
        "precision": tf.contrib.metrics.streaming_precision(hard, labels),
        "recall": tf.contrib.metrics.streaming_recall(hard, labels),
        "mean": tf.contrib.metrics.streaming_mean(predictions),
        "rmse": tf.contrib.metrics.streaming_root_mean_squared_error(
            predictions, tf.cast(labels, tf.float32)),
        "recall_at_1": tf.contrib.metrics.streaming_recall_at_k(
            tf.constant(SCORES), tf.constant(CLASSES), 1),
        "sparse_recall_at_2": tf.contrib.metrics.streaming_sparse_recall_at_k(
            tf.constant(SCORES), tf.constant(CLASSES), 2),
    }
    values, updates = tf.contrib.metrics.aggregate_metric_map(names_to_tuples)
    accuracy = tf.contrib.metrics.accuracy(hard, labels)
    sess.run(tf.local_variables_initializer())
    sess.run(list(updates.values()))
    result = {k: float(v) for k, v in sess.run(values).items()}
    result["non_streaming_accuracy"] = float(sess.run(accuracy))
    result["variables"] = sorted(v.op.name for v in tf.local_variables())
  return result


def slim_metrics_section():
  # contrib's own metrics (tf_slim's code), which read control_flow_ops.cond, array_ops.stack
  # and control_flow_ops.Assert from TensorFlow's private modules.
  with tf.Graph().as_default(), tf.Session() as sess:
    batch = tf.placeholder(tf.float32, [None])
    concat, concat_update = tf.contrib.metrics.streaming_concat(batch)
    points, points_update = tf.contrib.metrics.streaming_curve_points(
        LABELS, PREDICTIONS, num_thresholds=3)
    auc, auc_update = tf.contrib.metrics.auc_using_histogram(
        tf.cast(LABELS, tf.bool), PREDICTIONS, [0.0, 1.0], nbins=100)
    sess.run(tf.local_variables_initializer())
    sess.run(concat_update, {batch: [1.0, 2.0]})
    sess.run(concat_update, {batch: [3.0]})
    sess.run([points_update, auc_update])
    return {"concat": sess.run(concat).tolist(), "curve_points": sess.run(points).tolist(),
            "auc_using_histogram": float(sess.run(auc))}


def metric_learning_section():
  embeddings = np.random.RandomState(0).randn(8, 4).astype(np.float32)
  embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
  labels = np.array([0, 1, 2, 0, 1, 2, 0, 1])
  metric_learning = tf.contrib.losses.metric_learning
  with tf.Graph().as_default(), tf.Session() as sess:
    losses = {
        "triplet_semihard": metric_learning.triplet_semihard_loss(labels, embeddings),
        "contrastive": metric_learning.contrastive_loss(
            labels[:4] % 2, embeddings[:4], embeddings[4:]),
        "lifted_struct": metric_learning.lifted_struct_loss(labels, embeddings),
        "npairs": metric_learning.npairs_loss(labels[:3], embeddings[:3], embeddings[3:6]),
        # Its facility-location search is a tf.while_loop (control_flow_ops.while_loop).
        "cluster": metric_learning.cluster_loss(labels, embeddings, 1.0),
    }
    result = {k: float(v) for k, v in sess.run(losses).items()}
  result.update(embeddings=embeddings.tolist(), labels=labels.tolist())
  return result


def lookup_section():
  vocab = os.path.join(FLAGS.work_dir, "vocab.txt")
  with open(vocab, "w") as f:
    f.write("a\nb\nc\n")
  with tf.Graph().as_default(), tf.Session() as sess:
    tokens = tf.constant(["b", "zzz", "a", "c"])
    ids = tf.contrib.lookup.index_table_from_file(vocab, num_oov_buckets=1).lookup(tokens)
    strict = tf.contrib.lookup.index_table_from_file(vocab).lookup(tokens)
    words = tf.contrib.lookup.index_to_string_table_from_file(vocab).lookup(
        tf.constant([2, 0, 7], tf.int64))
    table = tf.contrib.lookup.HashTable(
        tf.contrib.lookup.KeyValueTensorInitializer(
            tf.constant(["x", "y"]), tf.constant([10, 20], tf.int64)), -1)
    mutable = tf.contrib.lookup.MutableHashTable(tf.string, tf.int64, -5, shared_name="m")
    insert = mutable.insert(tf.constant(["k"]), tf.constant([7], tf.int64))
    fetches = {
        "ids": ids, "strict": strict, "words": words,
        "hash": table.lookup(tf.constant(["y", "q"])),
        "mutable": mutable.lookup(tf.constant(["k", "other"])),
        "to_index": tf.contrib.lookup.string_to_index(tokens, ["c", "b"]),
        "to_string": tf.contrib.lookup.index_to_string(
            tf.constant([1, 5]), ["p", "q"]),
    }
    sess.run(tf.tables_initializer())
    sess.run(insert)
    got = sess.run(fetches)
  return {k: [x.decode() if isinstance(x, bytes) else int(x) for x in v]
          for k, v in got.items()}


SEQUENCES = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 24.0
LENGTHS = np.array([3, 2], np.int32)


def rnn_section():
  """Fused cells and stacked layers; the variables go to rnn.ckpt for the reference to restore."""
  with tf.Graph().as_default(), tf.Session() as sess:
    tf.set_random_seed(1)
    x = tf.constant(SEQUENCES)
    with tf.variable_scope("lstm"):
      lstm_out, lstm_state = tf.nn.dynamic_rnn(
          tf.contrib.rnn.LSTMBlockCell(5, use_peephole=True, cell_clip=0.5), x,
          sequence_length=LENGTHS, dtype=tf.float32)
    with tf.variable_scope("gru"):
      gru_out, _ = tf.nn.dynamic_rnn(
          tf.contrib.rnn.GRUBlockCell(3), x, sequence_length=LENGTHS, dtype=tf.float32)
    with tf.variable_scope("fused"):
      fused_out, fused_state = tf.contrib.rnn.LSTMBlockFusedCell(4)(
          tf.transpose(x, [1, 0, 2]), dtype=tf.float32, sequence_length=LENGTHS)
    with tf.variable_scope("reversed"):
      reversed_out, _ = tf.contrib.rnn.TimeReversedFusedRNN(
          tf.contrib.rnn.LSTMBlockFusedCell(3))(
              tf.transpose(x, [1, 0, 2]), dtype=tf.float32, sequence_length=LENGTHS)
    stacked, _, _ = tf.contrib.rnn.stack_bidirectional_dynamic_rnn(
        [tf.contrib.rnn.LSTMCell(2)], [tf.contrib.rnn.GRUCell(2)], x,
        sequence_length=LENGTHS, dtype=tf.float32)
    multi = tf.contrib.rnn.MultiRNNCell([tf.contrib.rnn.BasicLSTMCell(2)])
    static_out, _ = tf.contrib.rnn.static_rnn(
        multi, tf.unstack(x, axis=1), dtype=tf.float32, scope="static")
    sess.run(tf.global_variables_initializer())
    tf.train.Saver().save(sess, os.path.join(FLAGS.work_dir, "rnn.ckpt"))
    got = sess.run({"lstm": lstm_out, "lstm_c": lstm_state.c, "gru": gru_out,
                    "fused": fused_out, "fused_h": fused_state.h, "stacked": stacked,
                    "reversed": reversed_out,
                    "static": static_out[-1]})
    names = sorted(v.op.name for v in tf.global_variables())
  result = {k: v.tolist() for k, v in got.items()}
  result["variables"] = names
  with tf.Graph().as_default(), tf.Session() as sess:
    # LayerNormBasicLSTMCell with and without layer norm; its variables go into the JSON.
    x = tf.constant(SEQUENCES)
    with tf.variable_scope("ln"):
      ln_out, ln_state = tf.nn.dynamic_rnn(
          tf.contrib.rnn.LayerNormBasicLSTMCell(3, norm_gain=1.5, norm_shift=0.1), x,
          dtype=tf.float32)
    with tf.variable_scope("plain"):
      plain_out, _ = tf.nn.dynamic_rnn(
          tf.contrib.rnn.LayerNormBasicLSTMCell(2, forget_bias=0.5, layer_norm=False), x,
          dtype=tf.float32)
    sess.run(tf.global_variables_initializer())
    got = sess.run({"out": ln_out, "c": ln_state.c, "plain_out": plain_out})
    weights = {v.op.name: sess.run(v).tolist() for v in tf.global_variables()}
  result["layer_norm_lstm"] = {k: v.tolist() for k, v in got.items()}
  result["layer_norm_lstm"]["weights"] = weights
  return result


IMAGES = np.arange(2 * 5 * 5 * 3, dtype=np.float32).reshape(2, 5, 5, 3) / 150.0 - 0.5


def layers_section():
  """contrib.layers / slim / framework; the variables go to layers.ckpt."""
  with tf.Graph().as_default(), tf.Session() as sess:
    tf.set_random_seed(2)
    step = tf.contrib.framework.get_or_create_global_step()
    with tf.contrib.framework.arg_scope([tf.contrib.layers.conv2d], padding="VALID"):
      net = tf.contrib.layers.conv2d(tf.constant(IMAGES), 4, [3, 3])
    net = tf.contrib.layers.flatten(net)
    logits = tf.contrib.layers.fully_connected(
        net, 2, activation_fn=None,
        weights_regularizer=tf.contrib.layers.l2_regularizer(0.5))
    slim_out = tf.contrib.slim.fully_connected(net, 3, scope="slim_fc")
    embedded = tf.contrib.layers.embed_sequence(
        tf.constant([[1, 2], [0, 3]]), vocab_size=4, embed_dim=2)
    penalty = tf.add_n(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES))
    sess.run(tf.global_variables_initializer())
    tf.train.Saver().save(sess, os.path.join(FLAGS.work_dir, "layers.ckpt"))
    got = sess.run({"logits": logits, "slim": slim_out, "embedded": embedded,
                    "penalty": penalty, "step": step})
    result = {k: np.asarray(v).tolist() for k, v in got.items()}
    result["variables"] = sorted(v.op.name for v in tf.global_variables())
    result["model_variables"] = sorted(
        v.op.name for v in tf.contrib.framework.get_model_variables())
    result["to_restore"] = sorted(
        v.op.name for v in tf.contrib.framework.get_variables_to_restore(exclude=["slim_fc"]))
  return result


BN_INPUT = np.array([[1.0, 2.0, 0.0], [3.0, 0.0, 1.0], [5.0, 4.0, 2.0], [7.0, 2.0, 5.0]],
                    np.float32)


def batch_norm_section():
  """contrib.layers.batch_norm as CTR models use it (train / infer twins, updates in place),
  and slim.batch_norm under arg_scope with a tensor is_training and UPDATE_OPS."""
  with tf.Graph().as_default(), tf.Session() as sess:
    training = tf.placeholder(tf.bool, [])
    inp = tf.constant(BN_INPUT)
    bn_train = tf.contrib.layers.batch_norm(
        inp, decay=0.9, center=True, scale=True, updates_collections=None,
        is_training=True, reuse=None, scope="bn_0")
    bn_infer = tf.contrib.layers.batch_norm(
        inp, decay=0.9, center=True, scale=True, updates_collections=None,
        is_training=False, reuse=True, scope="bn_0")
    with tf.contrib.slim.arg_scope([tf.contrib.slim.batch_norm], decay=0.5, scale=True):
      images = tf.contrib.slim.batch_norm(tf.constant(IMAGES), is_training=training)
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    sess.run(tf.global_variables_initializer())
    got = {"train": sess.run(bn_train)}
    by_name = {v.op.name: v for v in tf.global_variables()}
    got["moving_mean"], got["moving_variance"] = sess.run(
        [by_name["bn_0/moving_mean"], by_name["bn_0/moving_variance"]])
    got["infer"] = sess.run(bn_infer)
    got["images_infer"] = sess.run(images, {training: False})
    got["images_train"], _ = sess.run([images, update_ops], {training: True})
    got["images_mean"] = sess.run(by_name["BatchNorm/moving_mean"])
    result = {k: np.asarray(v).tolist() for k, v in got.items()}
    result["variables"] = sorted(v.op.name for v in tf.global_variables())
    result["model_variables"] = sorted(v.op.name for v in tf.model_variables())
    result["update_ops"] = len(update_ops)
  return result


def estimator_section():
  """contrib.estimator extenders and hooks on a tiny regressor, contrib.distribute's strategy."""
  rng = np.random.RandomState(3)
  x = rng.rand(64, 2).astype(np.float32)
  y = x.dot(np.array([[2.0], [-1.0]], np.float32)) + 0.5
  ids = np.arange(64, dtype=np.int64)

  def model_fn(features, labels, mode):
    out = tf.layers.dense(features["x"], 1, name="out")
    predictions = {"y": out}
    if mode == tf.estimator.ModeKeys.PREDICT:
      return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.mean_squared_error(labels, out)
    optimizer = tf.contrib.estimator.clip_gradients_by_norm(
        tf.train.GradientDescentOptimizer(0.5), 1.0)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(
        mode, predictions=predictions, loss=loss, train_op=train_op)

  def metric_fn(labels, predictions):
    return {"mae": tf.metrics.mean_absolute_error(labels, predictions["y"])}

  def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": x, "id": ids}, y)).batch(16)

  estimator = tf.estimator.Estimator(
      model_fn, model_dir=os.path.join(FLAGS.work_dir, "estimator"))
  estimator = tf.contrib.estimator.add_metrics(estimator, metric_fn)
  hook = tf.contrib.estimator.stop_if_no_decrease_hook(estimator, "loss", 1000)
  estimator.train(lambda: input_fn().repeat(), steps=40, hooks=[hook])
  lock_file = os.path.join(estimator.model_dir, ".tfest_kit.lock")  # the runner's guard
  locked = os.path.exists(lock_file)
  metrics = estimator.evaluate(input_fn)
  forwarding = tf.contrib.estimator.forward_features(estimator, "id")
  rows = list(forwarding.predict(input_fn))
  strategy = tf.contrib.distribute.MirroredStrategy(num_gpus=0)
  return {
      "mae": float(metrics["mae"]),
      "loss": float(metrics["loss"]),
      "predicted": [float(r["y"][0]) for r in rows],
      "forwarded_ids": [int(r["id"]) for r in rows],
      "labels": y[:, 0].tolist(),
      "mirrored_devices": list(strategy.extended.worker_devices),
      "reduce_sum": str(tf.contrib.distribute.ReduceOp.SUM),
      "locked": locked,
      "guarded": [type(e).__module__ for e in (estimator, forwarding)],
  }


def crf_section():
  """A sequence tagger's CRF loss and decoding, as BERT-NER scripts wrote them."""
  with tf.Graph().as_default(), tf.Session() as sess:
    tf.set_random_seed(4)
    logits = tf.random_normal([2, 4, 3], seed=5)
    tags = tf.constant([[0, 1, 2, 1], [2, 2, 0, 0]])
    lengths = tf.constant([4, 2])
    with tf.variable_scope("crf_layer"):
      log_likelihood, transitions = tf.contrib.crf.crf_log_likelihood(
          logits, tags, lengths)
    decoded, best = tf.contrib.crf.crf_decode(logits, transitions, lengths)
    sess.run(tf.global_variables_initializer())
    got = sess.run({"logits": logits, "transitions": transitions,
                    "log_likelihood": log_likelihood, "decoded": decoded, "best": best})
    names = sorted(v.op.name for v in tf.global_variables())
    loss = tf.contrib.seq2seq.sequence_loss(
        tf.constant(got["logits"]), tags, tf.sequence_mask(lengths, 4, dtype=tf.float32))
    tiled = tf.contrib.seq2seq.tile_batch(tf.constant([[1, 2], [3, 4]]), 2)
    got["sequence_loss"], got["tiled"] = sess.run([loss, tiled])
  viterbi, _ = tf.contrib.crf.viterbi_decode(got["logits"][0], got["transitions"])
  result = {k: np.asarray(v).tolist() for k, v in got.items()}
  result["variables"] = names
  result["viterbi"] = [int(t) for t in viterbi]
  return result


def opt_section():
  """AdamW and MomentumW steps (as BERT-era fine-tuners used them), two LazyAdam steps."""
  with tf.Graph().as_default(), tf.Session() as sess:
    w = tf.get_variable("w", initializer=tf.constant([1.0, -2.0]))
    u = tf.get_variable("u", initializer=tf.constant([0.5, 0.5]))
    loss = tf.reduce_sum(w * tf.constant([3.0, 0.25])) + tf.reduce_sum(u * u)
    adamw = tf.contrib.opt.AdamWOptimizer(weight_decay=0.1, learning_rate=0.01)
    step = adamw.minimize(loss, var_list=[w])
    momentum = tf.contrib.opt.MomentumWOptimizer(0.5, learning_rate=0.1, momentum=0.9)
    step_u = momentum.minimize(loss, var_list=[u])
    sess.run(tf.global_variables_initializer())
    sess.run([step])
    sess.run([step_u])
    w_value, u_value = sess.run([w, u])
    names = sorted(v.op.name for v in tf.global_variables())
  with tf.Graph().as_default(), tf.Session() as sess:
    # LazyAdam on an embedding, as recommenders and NMT models used it: rows 0, 2, then 1, 2.
    emb = tf.get_variable("emb", initializer=tf.constant([[1.0, 2.0], [3.0, 4.0],
                                                          [5.0, 6.0], [7.0, 8.0]]))
    ids = tf.placeholder(tf.int32, [None])
    rows = tf.nn.embedding_lookup(emb, ids)
    lazy_loss = tf.reduce_sum(rows * tf.constant([1.0, -1.0]))
    lazy = tf.contrib.opt.LazyAdamOptimizer(learning_rate=0.1)
    lazy_step = lazy.minimize(lazy_loss)
    sess.run(tf.global_variables_initializer())
    sess.run(lazy_step, {ids: [0, 2, 2]})
    sess.run(lazy_step, {ids: [1, 2]})
    lazy_names = sorted(v.op.name for v in tf.global_variables())
    emb_value, m_value = sess.run([emb, lazy.get_slot(emb, "m")])
  with tf.Graph().as_default(), tf.Session() as sess:
    # optimize_loss with a float learning rate and a decay, as Estimator-era model_fns did.
    step = tf.train.get_or_create_global_step()
    v = tf.get_variable("v", initializer=tf.constant([1.0, -2.0]))
    train = tf.contrib.layers.optimize_loss(
        tf.reduce_sum(v * tf.constant([3.0, 0.25])), step, 0.1, "SGD",
        learning_rate_decay_fn=lambda lr, s: lr * 0.5)
    sess.run(tf.global_variables_initializer())
    sess.run(train)
    optimize_loss = {"v": sess.run(v).tolist(), "step": int(sess.run(step)),
                     "variables": sorted(x.op.name for x in tf.global_variables())}
  with tf.Graph().as_default(), tf.Session() as sess:
    # MovingAverageOptimizer as slim-era image models trained: average, then a swapping_saver.
    step = tf.train.get_or_create_global_step()
    ma_w = tf.get_variable("ma_w", initializer=tf.constant([1.0, -2.0]))
    ma_opt = tf.contrib.opt.MovingAverageOptimizer(
        tf.train.GradientDescentOptimizer(0.1), average_decay=0.5)
    ma_step = ma_opt.minimize(tf.reduce_sum(ma_w * ma_w), global_step=step)
    swapping = ma_opt.swapping_saver()
    sess.run(tf.global_variables_initializer())
    ma_values = [sess.run(ma_w).tolist()]
    for _ in range(3):
      sess.run(ma_step)
      ma_values.append(sess.run(ma_w).tolist())
    by_name = {x.op.name: x for x in tf.global_variables()}
    average = sess.run(by_name["ma_w/ExponentialMovingAverage"]).tolist()
    ma_names = sorted(by_name)
    ma_ckpt = swapping.save(sess, os.path.join(FLAGS.work_dir, "ema.ckpt"))
  with tf.Graph().as_default(), tf.Session() as sess:
    # Evaluation reads the checkpoint with a plain saver: the variable gets the average.
    restored_w = tf.get_variable("ma_w", [2])
    tf.train.Saver([restored_w]).restore(sess, ma_ckpt)
    moving_average = {"values": ma_values, "average": average, "variables": ma_names,
                      "restored": sess.run(restored_w).tolist(), "checkpoint": ma_ckpt}
  return {"w": w_value.tolist(), "u": u_value.tolist(), "variables": names,
          "optimize_loss": optimize_loss, "moving_average": moving_average,
          "lazy_emb": emb_value.tolist(), "lazy_m": m_value.tolist(),
          "lazy_variables": lazy_names}


def gradients_section():
  """slim.learning.create_train_op with gradient_multipliers and clipping (fine-tuning scripts
  multiplied the new head's gradients), and layers.recompute_grad against the plain function."""
  slim = tf.contrib.slim
  with tf.Graph().as_default(), tf.Session() as sess:
    w = tf.get_variable("gm/w", initializer=tf.constant([1.0, 1.0]))
    u = tf.get_variable("gm/u", initializer=tf.constant([1.0, 1.0]))
    loss = tf.reduce_sum((w + u) * tf.constant([3.0, 4.0]))
    train_op = slim.learning.create_train_op(
        loss, tf.train.GradientDescentOptimizer(1.0), gradient_multipliers={"gm/w": 3.0},
        clip_gradient_norm=10.0, summarize_gradients=True)
    sess.run(tf.global_variables_initializer())
    loss_value = sess.run(train_op)
    created = {"w": sess.run(w).tolist(), "u": sess.run(u).tolist(), "loss": float(loss_value),
               "step": int(sess.run(tf.train.get_global_step())),
               "summaries": sorted(x.op.name for x in tf.get_collection(tf.GraphKeys.SUMMARIES))}
    created["indexed"] = sess.run(slim.learning.multiply_gradients(
        [(tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([1])), w)],
        {w: 0.5})[0][0].values).tolist()

  @tf.contrib.layers.recompute_grad
  def block(x):
    hidden = tf.layers.dense(x, 4, activation=tf.tanh, name="hidden")
    return tf.contrib.layers.fully_connected(hidden, 1, activation_fn=None, scope="out")

  with tf.Graph().as_default(), tf.Session() as sess:
    x = tf.constant(np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(3, 2))
    with tf.variable_scope("block", use_resource=True):
      y = block(x)
    variables = tf.trainable_variables()
    graph = tf.get_default_graph()
    before = len(graph.get_operations())
    grads = tf.gradients(tf.reduce_sum(y * y), variables + [x])
    # The backward pass ran `block` again: its forward MatMuls appear among the gradient ops.
    recomputed = [op.type for op in graph.get_operations()[before:] if op.type == "MatMul"]
    with tf.variable_scope("block", reuse=True):
      plain_y = block.__wrapped__(x)
    before = len(graph.get_operations())
    plain_grads = tf.gradients(tf.reduce_sum(plain_y * plain_y), variables + [x])
    plain = [op.type for op in graph.get_operations()[before:] if op.type == "MatMul"]
    sess.run(tf.global_variables_initializer())
    got, want = sess.run([grads, plain_grads])
    recompute = {"grads": [g.tolist() for g in got], "plain": [g.tolist() for g in want],
                 "matmuls": len(recomputed), "plain_matmuls": len(plain),
                 "variables": [v.op.name for v in variables]}
  return {"create_train_op": created, "recompute_grad": recompute}


def summary_section():
  """A TPUEstimator host_call-style summary written with tf.contrib.summary in graph mode."""
  logdir = os.path.join(FLAGS.work_dir, "summaries")
  with tf.Graph().as_default(), tf.Session() as sess:
    step = tf.train.get_or_create_global_step()
    writer = tf.contrib.summary.create_file_writer(logdir)
    with writer.as_default(), tf.contrib.summary.always_record_summaries():
      tf.contrib.summary.scalar("loss", tf.constant(0.25), step=step)
      summary_ops = tf.contrib.summary.all_summary_ops()
    sess.run(tf.global_variables_initializer())
    sess.run(tf.contrib.summary.summary_writer_initializer_op())
    sess.run(summary_ops)
    sess.run(writer.flush())
  return {"logdir": logdir}


def main(_):
  print(json.dumps({
      "training": training_section(),
      "metrics": metrics_section(),
      "slim_metrics": slim_metrics_section(),
      "metric_learning": metric_learning_section(),
      "lookup": lookup_section(),
      "rnn": rnn_section(),
      "layers": layers_section(),
      "batch_norm": batch_norm_section(),
      "estimator": estimator_section(),
      "crf": crf_section(),
      "opt": opt_section(),
      "gradients": gradients_section(),
      "summary": summary_section(),
  }))


if __name__ == "__main__":
  flags.mark_flag_as_required("work_dir")
  tf.app.run()
