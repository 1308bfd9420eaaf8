"""A BERT-tiny-like classifier twice: TF1 style (``get_variable``) and as a Keras model.

2 layers, hidden 128, 2 heads, feed-forward 512, sequence 64, no dropout (so every variant
does exactly the same arithmetic). Both versions have the same matmuls; :func:`matmul_flops`
(from :mod:`benchmarks.cases._bert_tiny_shape`, which needs no TensorFlow) counts them for the
"fraction of the machine's matmul rate" figure.
"""

from __future__ import annotations

import math

from benchmarks.cases._bert_tiny_shape import CONFIG, matmul_flops
from tfest_kit._tf import tf, tf2

__all__ = ["CONFIG", "encoder_logits", "keras_model", "matmul_flops"]


def _init():
    return tf.truncated_normal_initializer(stddev=0.02)


def _dense(x, units, name, activation=None):
    with tf.variable_scope(name):
        kernel = tf.get_variable("kernel", [x.shape[-1], units], initializer=_init())
        bias = tf.get_variable("bias", [units], initializer=tf.zeros_initializer())
        y = tf.nn.bias_add(tf.matmul(x, kernel), bias)
    return activation(y) if activation else y


def _layer_norm(x, name):
    with tf.variable_scope(name):
        gamma = tf.get_variable("gamma", [x.shape[-1]], initializer=tf.ones_initializer())
        beta = tf.get_variable("beta", [x.shape[-1]], initializer=tf.zeros_initializer())
        mean, variance = tf.nn.moments(x, [-1], keep_dims=True)
        return (x - mean) * tf.rsqrt(variance + 1e-12) * gamma + beta


def _attention(x2d, batch, config):
    s, h, heads = config["seq_len"], config["hidden"], config["heads"]
    size = h // heads

    def split(t):
        return tf.transpose(tf.reshape(t, [batch, s, heads, size]), [0, 2, 1, 3])

    q, k, v = (split(_dense(x2d, h, name)) for name in ("query", "key", "value"))
    scores = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(size))
    context = tf.matmul(tf.nn.softmax(scores), v)
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch * s, h])
    return _dense(context, h, "output")


def encoder_logits(input_ids, config: dict = CONFIG):
    """Logits ``[batch, num_classes]`` for int32 ``input_ids [batch, seq_len]`` (TF1 graph)."""
    s, h = config["seq_len"], config["hidden"]
    batch = tf.shape(input_ids)[0]
    with tf.variable_scope("bert"):
        table = tf.get_variable("word_embeddings", [config["vocab_size"], h], initializer=_init())
        positions = tf.get_variable("position_embeddings", [s, h], initializer=_init())
        x = tf.gather(table, input_ids) + positions[None]
        x = tf.reshape(_layer_norm(x, "embeddings_ln"), [batch * s, h])
        for i in range(config["layers"]):
            with tf.variable_scope(f"layer_{i}"):
                x = _layer_norm(x + _attention(x, batch, config), "attention_ln")
                hidden = _dense(x, config["intermediate"], "intermediate", tf2.nn.gelu)
                x = _layer_norm(x + _dense(hidden, h, "ffn_output"), "output_ln")
        first = tf.reshape(x, [batch, s, h])[:, 0]
        pooled = _dense(first, h, "pooler", tf.tanh)
    return _dense(pooled, config["num_classes"], "classifier")


def keras_model(config: dict = CONFIG):
    """The same network as a functional Keras model (input ``input_ids``)."""
    keras = tf2.keras
    s, h = config["seq_len"], config["hidden"]
    init = keras.initializers.TruncatedNormal(stddev=0.02)
    ids = keras.Input([s], dtype="int32", name="input_ids")
    x = keras.layers.Embedding(config["vocab_size"], h, embeddings_initializer=init)(ids)
    x = _AddPositions(s, h)(x)
    x = keras.layers.LayerNormalization(epsilon=1e-12)(x)
    for _ in range(config["layers"]):
        attended = keras.layers.MultiHeadAttention(
            config["heads"], h // config["heads"], kernel_initializer=init
        )(x, x)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + attended)
        hidden = keras.layers.Dense(config["intermediate"], "gelu", kernel_initializer=init)(x)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(
            x + keras.layers.Dense(h, kernel_initializer=init)(hidden)
        )
    pooled = keras.layers.Dense(h, "tanh", kernel_initializer=init)(x[:, 0])
    logits = keras.layers.Dense(config["num_classes"], kernel_initializer=init)(pooled)
    return keras.Model(ids, logits)


class _AddPositions(tf2.keras.layers.Layer):
    def __init__(self, seq_len, hidden, **kwargs):
        super().__init__(**kwargs)
        self._shape = [seq_len, hidden]

    def build(self, input_shape):
        self.positions = self.add_weight(
            "position_embeddings",
            self._shape,
            initializer=tf2.keras.initializers.TruncatedNormal(stddev=0.02),
        )

    def call(self, x):
        return x + self.positions[None]
