"""``tf.contrib.layers`` as TF 1.15 had it, from ``tf_slim`` (where contrib's layers moved).

``tf_slim`` 1.1 carries contrib's layer functions on, graph-mode and unchanged: the same
arguments, defaults (``fully_connected``'s ReLU, ``variance_scaling_initializer``'s factor 2.0,
``l2_regularizer``'s ``scale * sum(w ** 2) / 2``) and variable names (``fully_connected/
weights``, ``Conv/weights``, ``BatchNorm/moving_mean`` …), so they are served as they are.
Three are tfest_kit's: ``layer_norm`` (:func:`tfest_kit.legacy.layer_norm`, BERT's epsilon, the
same ``LayerNorm/{beta,gamma}``), ``embed_sequence`` (a port: ``EmbedSequence/embeddings``) and
``batch_norm`` (a port: tf_slim 1.1's does not run on TensorFlow 2.15; ``BatchNorm/moving_mean`` …);
``safe_embedding_lookup_sparse`` is ``tf.compat.v1.nn``'s.  The feature-column functions
(``real_valued_column`` …) are not served: their TensorFlow 2.15 home is ``tf.feature_column``.

``tf_slim`` is imported when a script first reaches ``tf.contrib.layers`` (or
``tf.contrib.slim`` / ``tf.contrib.framework``).

Example:

    net = tf.contrib.layers.fully_connected(features, 64)   # fully_connected/weights, /biases
"""

from __future__ import annotations

from typing import Any, Optional

import tf_slim

from tfest_kit._tf import tf
from tfest_kit.legacy._layer_norm import layer_norm
from tfest_kit.legacy.contrib._batch_norm import batch_norm

# TF 1.15's tf.contrib.layers names that tf_slim 1.1 carries on.
_FROM_SLIM = (
    "avg_pool2d",
    "avg_pool3d",
    "bias_add",
    "conv1d",
    "conv2d",
    "conv2d_in_plane",
    "conv2d_transpose",
    "conv3d",
    "conv3d_transpose",
    "convolution",
    "convolution1d",
    "convolution2d",
    "convolution2d_in_plane",
    "convolution2d_transpose",
    "convolution3d",
    "convolution3d_transpose",
    "dense_to_sparse",
    "dropout",
    "elu",
    "flatten",
    "fully_connected",
    "GDN",
    "gdn",
    "group_norm",
    "images_to_sequence",
    "instance_norm",
    "legacy_fully_connected",
    "legacy_linear",
    "legacy_relu",
    "linear",
    "max_pool2d",
    "max_pool3d",
    "maxout",
    "one_hot_encoding",
    "pool",
    "recompute_grad",
    "relu",
    "relu6",
    "repeat",
    "RevBlock",
    "rev_block",
    "scale_gradient",
    "separable_conv2d",
    "separable_convolution2d",
    "sequence_to_images",
    "softmax",
    "spatial_softmax",
    "stack",
    "unit_norm",
    "apply_regularization",
    "l1_l2_regularizer",
    "l1_regularizer",
    "l2_regularizer",
    "sum_regularizer",
    "xavier_initializer",
    "xavier_initializer_conv2d",
    "variance_scaling_initializer",
    "optimize_loss",
    "OPTIMIZER_CLS_NAMES",
    "OPTIMIZER_SUMMARIES",
    "adaptive_clipping_fn",
    "summarize_activation",
    "summarize_activations",
    "summarize_collection",
    "summarize_tensor",
    "summarize_tensors",
)

__all__ = [
    *_FROM_SLIM,
    "batch_norm",
    "layer_norm",
    "embed_sequence",
    "safe_embedding_lookup_sparse",
    "BACKING",
    "NOT_SERVED",
]

BACKING = {
    **{name: f"tf_slim.{name}" for name in _FROM_SLIM},
    "layer_norm": (
        "tfest_kit.legacy.layer_norm (same variables), or "
        "tf.keras.layers.LayerNormalization(epsilon=1e-12, name='LayerNorm')"
    ),
    "embed_sequence": "tf.nn.embedding_lookup (tfest_kit.legacy.contrib.layers, a port)",
    "batch_norm": "tf.nn.fused_batch_norm (tfest_kit.legacy.contrib.layers, a port of TF 1.15's)",
    "safe_embedding_lookup_sparse": "tf.compat.v1.nn.safe_embedding_lookup_sparse",
}

# tf.contrib.layers' feature columns -> their TensorFlow 2.15 home (all in tf.compat.v1).
NOT_SERVED = {
    "real_valued_column": "tf.feature_column.numeric_column",
    "sparse_column_with_hash_bucket": "tf.feature_column.categorical_column_with_hash_bucket",
    "sparse_column_with_keys": "tf.feature_column.categorical_column_with_vocabulary_list",
    "sparse_column_with_vocabulary_file": (
        "tf.feature_column.categorical_column_with_vocabulary_file"
    ),
    "sparse_column_with_integerized_feature": "tf.feature_column.categorical_column_with_identity",
    "bucketized_column": "tf.feature_column.bucketized_column",
    "crossed_column": "tf.feature_column.crossed_column",
    "embedding_column": "tf.feature_column.embedding_column",
    "one_hot_column": "tf.feature_column.indicator_column",
    "weighted_sparse_column": "tf.feature_column.weighted_categorical_column",
    "input_from_feature_columns": "tf.feature_column.input_layer",
    "weighted_sum_from_feature_columns": "tf.feature_column.linear_model",
    "create_feature_spec_for_parsing": "tf.feature_column.make_parse_example_spec",
    "parse_feature_columns_from_examples": (
        "tf.parse_example(serialized, tf.feature_column.make_parse_example_spec(columns))"
    ),
}

for _name in _FROM_SLIM:
    globals()[_name] = getattr(tf_slim, _name)
safe_embedding_lookup_sparse = tf.nn.safe_embedding_lookup_sparse


def embed_sequence(
    ids,
    vocab_size: Optional[int] = None,
    embed_dim: Optional[int] = None,
    unique: bool = False,
    initializer: Any = None,
    regularizer: Any = None,
    trainable: bool = True,
    scope: Any = None,
    reuse: Any = None,
):
    """``tf.contrib.layers.embed_sequence``: ids ``[batch, length]`` -> ``[batch, length, dim]``.

    The embedding matrix is the model variable ``EmbedSequence/embeddings`` (in ``scope``),
    as in TF 1.15.

    Args:
      ids: int32/int64 ids.
      vocab_size: rows of the matrix (not needed when reusing).
      embed_dim: columns of the matrix (not needed when reusing).
      unique: look each distinct id up once (same result).
      initializer: of the matrix; default the scope's.
      regularizer: of the matrix.
      trainable: whether the matrix is trained.
      scope: variable scope; default ``EmbedSequence``.
      reuse: reuse the scope's matrix.

    Returns:
      The embedded sequences.

    Raises:
      ValueError: if ``vocab_size`` or ``embed_dim`` is missing when not reusing.

    Example:

        embedded = embed_sequence(ids, vocab_size=1000, embed_dim=64)
    """
    if not (reuse or (vocab_size and embed_dim)):
        raise ValueError(
            "Must specify vocab size and embedding dimension when not reusing. "
            f"Got vocab_size={vocab_size} and embed_dim={embed_dim}"
        )
    with tf.variable_scope(scope, "EmbedSequence", [ids], reuse=reuse):
        shape = None if vocab_size is None or embed_dim is None else [vocab_size, embed_dim]
        embeddings = tf_slim.model_variable(
            "embeddings",
            shape=shape,
            initializer=initializer,
            regularizer=regularizer,
            trainable=trainable,
        )
        if unique:
            distinct, index = tf.unique(tf.reshape(ids, [-1]))
            looked_up = tf.gather(tf.nn.embedding_lookup(embeddings, distinct), index)
            return tf.reshape(looked_up, tf.concat([tf.shape(ids), tf.shape(embeddings)[1:]], 0))
        return tf.nn.embedding_lookup(embeddings, ids)
