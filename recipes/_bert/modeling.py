"""A BERT transformer encoder whose variables carry the released checkpoint's names.

Built with ``tf.compat.v1.get_variable`` under variable scopes, so a released BERT checkpoint
(``bert_model.ckpt`` of BERT-Base / -Large) warm-starts it by name:

    bert/embeddings/{word_embeddings, token_type_embeddings, position_embeddings}
    bert/embeddings/LayerNorm/{beta, gamma}
    bert/encoder/layer_<i>/attention/self/{query, key, value}/{kernel, bias}
    bert/encoder/layer_<i>/attention/output/dense/{kernel, bias}
    bert/encoder/layer_<i>/attention/output/LayerNorm/{beta, gamma}
    bert/encoder/layer_<i>/intermediate/dense/{kernel, bias}
    bert/encoder/layer_<i>/output/dense/{kernel, bias}
    bert/encoder/layer_<i>/output/LayerNorm/{beta, gamma}
    bert/pooler/dense/{kernel, bias}

and the classifier head of ``run_classifier.py``: ``output_weights`` ``[num_labels, hidden]``
and ``output_bias``. Layer norm uses ``tf.contrib.layers.layer_norm``'s epsilon (1e-12) and the
GELU is the tanh approximation of the original, so the released weights compute what they did.

Example:

    config = BertConfig.from_json_file("bert_config.json")
    network = classifier_network(config, num_labels=2)
    model_fn = tfest_kit.model_fn.classifier(network, num_classes=2, optimizer="adamw")
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Callable

from tfest_kit._tf import estimator, tf

__all__ = ["BertConfig", "bert_encoder", "classifier_network", "layer_norm", "LAYER_NORM_EPSILON"]

LAYER_NORM_EPSILON = 1e-12
_ACTIVATIONS = ("gelu", "relu", "tanh", "linear")


@dataclasses.dataclass
class BertConfig:
    """The fields of ``bert_config.json``; unknown keys in the file are ignored."""

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 16
    initializer_range: float = 0.02

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"BertConfig `{name}` must be a positive int. Got: {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                "BertConfig `hidden_size` must be a multiple of `num_attention_heads`. Got: "
                f"{self.hidden_size} and {self.num_attention_heads}"
            )
        if self.hidden_act not in _ACTIVATIONS:
            raise ValueError(
                f"BertConfig `hidden_act` must be one of {list(_ACTIVATIONS)}. "
                f"Got: {self.hidden_act!r}"
            )

    @classmethod
    def from_dict(cls, values: dict) -> BertConfig:
        """Builds a config from a dict, ignoring keys this model does not use."""
        names = {f.name for f in dataclasses.fields(cls)}
        if "vocab_size" not in values:
            raise ValueError(f"A BERT config needs `vocab_size`. Got keys: {sorted(values)}")
        return cls(**{k: v for k, v in values.items() if k in names})

    @classmethod
    def from_json_file(cls, path: str) -> BertConfig:
        """Reads ``bert_config.json``.

        Raises:
          ValueError: if the file is missing or is not a JSON object with ``vocab_size``.
        """
        if not tf.io.gfile.exists(path):
            raise ValueError(f"`bert_config_file` does not exist. Got: {path!r}")
        with tf.io.gfile.GFile(path, "r") as f:
            try:
                values = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"`bert_config_file` is not valid JSON. Got: {path!r} ({e})"
                ) from e
        if not isinstance(values, dict):
            raise ValueError(f"`bert_config_file` must hold a JSON object. Got: {values!r}")
        return cls.from_dict(values)

    def to_json_string(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"


def _initializer(config: BertConfig):
    return tf.truncated_normal_initializer(stddev=config.initializer_range)


def gelu(x):
    """GELU, tanh approximation (as in the original BERT)."""
    cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
    return x * cdf


def _activation(name: str) -> Callable:
    return {"gelu": gelu, "relu": tf.nn.relu, "tanh": tf.tanh, "linear": tf.identity}[name]


def _dropout(x, rate: float, training: bool):
    if not training or not rate:
        return x
    return tf.nn.dropout(x, rate=rate)


def layer_norm(x, scope: str = "LayerNorm"):
    """Layer norm over the last axis with variables ``<scope>/beta`` and ``<scope>/gamma``."""
    with tf.variable_scope(scope):
        size = x.shape[-1]
        beta = tf.get_variable("beta", [size], initializer=tf.zeros_initializer())
        gamma = tf.get_variable("gamma", [size], initializer=tf.ones_initializer())
        mean, variance = tf.nn.moments(x, [-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, beta, gamma, LAYER_NORM_EPSILON)


def _dense(x, units: int, name: str, initializer, activation=None):
    """A dense layer on ``[..., in]`` with variables ``<name>/kernel`` and ``<name>/bias``."""
    with tf.variable_scope(name):
        kernel = tf.get_variable("kernel", [x.shape[-1], units], initializer=initializer)
        bias = tf.get_variable("bias", [units], initializer=tf.zeros_initializer())
        y = tf.nn.bias_add(tf.tensordot(x, kernel, [[x.shape.rank - 1], [0]]), bias)
        return activation(y) if activation is not None else y


def _embeddings(config: BertConfig, input_ids, segment_ids, training: bool):
    seq_length = input_ids.shape[1]
    if seq_length > config.max_position_embeddings:
        raise ValueError(
            f"`max_seq_length` must be at most max_position_embeddings "
            f"({config.max_position_embeddings}). Got: {seq_length}"
        )
    init = _initializer(config)
    with tf.variable_scope("embeddings"):
        words = tf.get_variable(
            "word_embeddings", [config.vocab_size, config.hidden_size], initializer=init
        )
        types = tf.get_variable(
            "token_type_embeddings", [config.type_vocab_size, config.hidden_size], initializer=init
        )
        positions = tf.get_variable(
            "position_embeddings",
            [config.max_position_embeddings, config.hidden_size],
            initializer=init,
        )
        output = tf.gather(words, input_ids) + tf.gather(types, segment_ids)
        output += tf.expand_dims(positions[:seq_length], 0)
        return _dropout(layer_norm(output), config.hidden_dropout_prob, training)


def _attention(config: BertConfig, x, mask_adder, training: bool):
    heads = config.num_attention_heads
    size = config.hidden_size // heads
    batch, seq_length = tf.shape(x)[0], x.shape[1]
    init = _initializer(config)

    def split_heads(t):
        return tf.transpose(tf.reshape(t, [batch, seq_length, heads, size]), [0, 2, 1, 3])

    with tf.variable_scope("self"):
        query = split_heads(_dense(x, config.hidden_size, "query", init))
        key = split_heads(_dense(x, config.hidden_size, "key", init))
        value = split_heads(_dense(x, config.hidden_size, "value", init))
        scores = tf.matmul(query, key, transpose_b=True) / math.sqrt(size) + mask_adder
        probs = _dropout(tf.nn.softmax(scores), config.attention_probs_dropout_prob, training)
        context = tf.transpose(tf.matmul(probs, value), [0, 2, 1, 3])
        context = tf.reshape(context, [batch, seq_length, config.hidden_size])
    with tf.variable_scope("output"):
        output = _dense(context, config.hidden_size, "dense", init)
        output = _dropout(output, config.hidden_dropout_prob, training)
        return layer_norm(output + x)


def _layer(config: BertConfig, x, mask_adder, training: bool):
    init = _initializer(config)
    with tf.variable_scope("attention"):
        attended = _attention(config, x, mask_adder, training)
    with tf.variable_scope("intermediate"):
        hidden = _dense(
            attended, config.intermediate_size, "dense", init, _activation(config.hidden_act)
        )
    with tf.variable_scope("output"):
        output = _dense(hidden, config.hidden_size, "dense", init)
        output = _dropout(output, config.hidden_dropout_prob, training)
        return layer_norm(output + attended)


def bert_encoder(
    config: BertConfig, input_ids, input_mask, segment_ids, training: bool, scope: str = "bert"
) -> tuple[Any, Any]:
    """Builds the encoder; returns ``(sequence_output [B, T, H], pooled_output [B, H])``.

    Args:
      config: the model's :class:`BertConfig`.
      input_ids: int32 ``[batch, seq_length]`` word-piece ids (``seq_length`` static).
      input_mask: int32 ``[batch, seq_length]``, 1 for real tokens, 0 for padding.
      segment_ids: int32 ``[batch, seq_length]``, 0 for sentence A, 1 for sentence B.
      training: apply dropout.
      scope: top variable scope (``"bert"`` for the released checkpoints).

    Returns:
      The last layer's sequence output and the pooled ``[CLS]`` output (dense + tanh).

    Raises:
      ValueError: if the sequence length is unknown or exceeds ``max_position_embeddings``.

    Example:

        _, pooled = bert_encoder(config, ids, mask, segments, training=True)
    """
    input_ids = tf.convert_to_tensor(input_ids)
    if input_ids.shape.rank != 2 or input_ids.shape[1] is None:
        raise ValueError(
            f"`input_ids` must be [batch, seq_length] with a static seq_length. "
            f"Got: shape {input_ids.shape}"
        )
    input_ids = tf.cast(input_ids, tf.int32)
    segment_ids = tf.cast(segment_ids, tf.int32)
    # Every query position may attend to the real (mask 1) key positions only.
    mask = tf.cast(tf.reshape(input_mask, [-1, 1, 1, input_ids.shape[1]]), tf.float32)
    mask_adder = (1.0 - mask) * -10000.0
    with tf.variable_scope(scope):
        x = _embeddings(config, input_ids, segment_ids, training)
        with tf.variable_scope("encoder"):
            for i in range(config.num_hidden_layers):
                with tf.variable_scope(f"layer_{i}"):
                    x = _layer(config, x, mask_adder, training)
        with tf.variable_scope("pooler"):
            pooled = _dense(x[:, 0], config.hidden_size, "dense", _initializer(config), tf.tanh)
    return x, pooled


def classifier_network(config: BertConfig, num_labels: int) -> Callable:
    """Returns ``network_fn(features, mode, params) -> logits`` for ``tfest_kit.model_fn``.

    ``features`` holds ``input_ids``, ``input_mask`` and ``segment_ids``; the head is
    ``run_classifier.py``'s: dropout 0.1 on the pooled output, then ``output_weights`` /
    ``output_bias``.

    Example:

        model_fn = tfest_kit.model_fn.classifier(classifier_network(config, 2), num_classes=2)
    """

    def network_fn(features, mode, params):
        del params
        missing = [k for k in ("input_ids", "input_mask", "segment_ids") if k not in features]
        if missing:
            raise ValueError(
                f"BERT features must include input_ids, input_mask and segment_ids. "
                f"Got: {sorted(features)}"
            )
        training = mode == estimator.ModeKeys.TRAIN
        _, pooled = bert_encoder(
            config,
            features["input_ids"],
            features["input_mask"],
            features["segment_ids"],
            training,
        )
        weights = tf.get_variable(
            "output_weights",
            [num_labels, config.hidden_size],
            initializer=tf.truncated_normal_initializer(stddev=0.02),
        )
        bias = tf.get_variable("output_bias", [num_labels], initializer=tf.zeros_initializer())
        pooled = _dropout(pooled, 0.1, training)
        return tf.nn.bias_add(tf.matmul(pooled, weights, transpose_b=True), bias)

    return network_fn
