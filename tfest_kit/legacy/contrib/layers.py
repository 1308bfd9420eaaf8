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
from tfest_kit.legacy.contrib._recompute_grad import recompute_grad

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
    "optimize_loss",
    "layer_norm",
    "embed_sequence",
    "safe_embedding_lookup_sparse",
    "recompute_grad",
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
    "optimize_loss": "tf.compat.v1.train optimizers (tfest_kit.legacy.contrib.layers, a port)",
    "safe_embedding_lookup_sparse": "tf.compat.v1.nn.safe_embedding_lookup_sparse",
    "recompute_grad": "tf.custom_gradient (tfest_kit.legacy.contrib.layers, a port of TF 1.15's)",
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


def _multiply_gradients(grads_and_vars, multipliers):
    out = []
    for grad, var in grads_and_vars:
        if grad is not None and (var in multipliers or var.name in multipliers):
            factor = multipliers[var if var in multipliers else var.name]
            if isinstance(grad, tf.IndexedSlices):
                grad = tf.IndexedSlices(grad.values * factor, grad.indices, grad.dense_shape)
            else:
                grad *= tf.cast(factor, grad.dtype)
        out.append((grad, var))
    return out


def _with_noise(grads_and_vars, scale):
    out = []
    for grad, var in grads_and_vars:
        if grad is not None:
            shape = grad.dense_shape if isinstance(grad, tf.IndexedSlices) else grad.shape
            grad = grad + tf.truncated_normal(shape) * scale
        out.append((grad, var))
    return out


def optimize_loss(
    loss,
    global_step,
    learning_rate,
    optimizer,
    gradient_noise_scale=None,
    gradient_multipliers=None,
    clip_gradients=None,
    learning_rate_decay_fn=None,
    update_ops=None,
    variables=None,
    name=None,
    summaries=None,
    colocate_gradients_with_ops=False,
    increment_global_step=True,
):
    """``tf.contrib.layers.optimize_loss`` as TF 1.15 had it (a port; tf_slim 1.1's fails).

    tf_slim 1.1's copy reads ``ops.Tensor`` and ``ops.IndexedSlices``, which TensorFlow 2.15's
    ``tensorflow.python.framework.ops`` no longer has.  Same arguments, defaults, variables
    (``OptimizeLoss/learning_rate`` for a float rate) and summaries.

    Args:
      loss: scalar loss.
      global_step: incremented by the update (default: the graph's).
      learning_rate: a float, a scalar tensor, or ``None`` with an optimizer instance.
      optimizer: a name of ``OPTIMIZER_CLS_NAMES``, an Optimizer class or instance, or a
        function of the learning rate returning one.
      gradient_noise_scale: adds that much truncated-normal noise to the gradients.
      gradient_multipliers: ``{variable or its name: factor}``.
      clip_gradients: a float (clip by global norm) or a function of ``(grad, var)`` pairs.
      learning_rate_decay_fn: ``fn(learning_rate, global_step)``.
      update_ops: run before the loss (default ``UPDATE_OPS``).
      variables: to train (default: the trainable ones).
      name: variable scope; default ``OptimizeLoss``.
      summaries: of ``OPTIMIZER_SUMMARIES`` (default loss, learning_rate, global_gradient_norm).
      colocate_gradients_with_ops: passed to ``compute_gradients``.
      increment_global_step: whether the update increments ``global_step``.

    Returns:
      The loss, computed after the update.

    Raises:
      ValueError: as TF 1.15's, for each inconsistent argument.

    Example:

        train_op = tf.contrib.layers.optimize_loss(loss, global_step, 0.1, "Adam")
    """
    loss = tf.convert_to_tensor(loss)
    tf.debugging.assert_scalar(loss)
    if global_step is None:
        global_step = tf.train.get_global_step()
    else:
        tf.train.assert_global_step(global_step)
    with tf.variable_scope(name, "OptimizeLoss", [loss, global_step]):
        if update_ops is None:
            update_ops = set(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
        if update_ops:
            with tf.control_dependencies(list(update_ops)):
                loss = tf.identity(loss)
        lr = None
        if learning_rate is not None:
            if isinstance(learning_rate, (tf.Tensor, tf.Variable)) and (
                learning_rate.shape.ndims == 0
            ):
                lr = learning_rate
            elif isinstance(learning_rate, float):
                if learning_rate < 0.0:
                    raise ValueError(f"Invalid learning_rate {learning_rate}.")
                lr = tf.get_variable(
                    "learning_rate",
                    [],
                    trainable=False,
                    initializer=tf.constant_initializer(learning_rate),
                )
            else:
                raise ValueError(
                    "Learning rate should be 0d Tensor or float. "
                    f"Got {learning_rate} of type {type(learning_rate)}"
                )
        if summaries is None:
            summaries = ["loss", "learning_rate", "global_gradient_norm"]
        for summary in summaries:
            if summary not in tf_slim.OPTIMIZER_SUMMARIES:
                raise ValueError(
                    "Summaries should be one of "
                    f"[{', '.join(tf_slim.OPTIMIZER_SUMMARIES)}], you provided {summary}."
                )
        if learning_rate is not None and learning_rate_decay_fn is not None:
            if global_step is None:
                raise ValueError("global_step is required for learning_rate_decay_fn.")
            lr = learning_rate_decay_fn(lr, global_step)
            if "learning_rate" in summaries:
                tf.summary.scalar("learning_rate", lr)
        if isinstance(optimizer, str):
            if lr is None:
                raise ValueError(
                    "Learning rate is None, but should be specified if optimizer is string "
                    f"({optimizer})."
                )
            if optimizer not in tf_slim.OPTIMIZER_CLS_NAMES:
                raise ValueError(
                    f"Optimizer name should be one of [{', '.join(tf_slim.OPTIMIZER_CLS_NAMES)}]"
                    f", you provided {optimizer}."
                )
            opt = tf_slim.OPTIMIZER_CLS_NAMES[optimizer](learning_rate=lr)
        elif isinstance(optimizer, type) and issubclass(optimizer, tf.train.Optimizer):
            if lr is None:
                raise ValueError(
                    "Learning rate is None, but should be specified if optimizer is class "
                    f"({optimizer})."
                )
            opt = optimizer(learning_rate=lr)
        elif isinstance(optimizer, tf.train.Optimizer):
            opt = optimizer
        elif callable(optimizer):
            opt = optimizer(lr) if learning_rate is not None else optimizer()
            if not isinstance(opt, tf.train.Optimizer):
                raise ValueError(
                    "Unrecognized optimizer: function should return subclass of Optimizer. "
                    f"Got {opt}."
                )
        else:
            raise ValueError(
                "Unrecognized optimizer: should be string, subclass of Optimizer, instance of "
                f"subclass of Optimizer or function with one argument. Got {optimizer}."
            )
        if variables is None:
            variables = tf.trainable_variables()
        gradients = opt.compute_gradients(
            loss, variables, colocate_gradients_with_ops=colocate_gradients_with_ops
        )
        if gradient_noise_scale is not None:
            gradients = _with_noise(gradients, gradient_noise_scale)
        if gradient_multipliers is not None:
            gradients = _multiply_gradients(gradients, gradient_multipliers)
            if not gradients:
                raise ValueError(
                    "Empty list of (gradient, var) pairs encountered. This is most likely to "
                    "be caused by an improper value of gradient_multipliers."
                )
        norms = "global_gradient_norm" in summaries or "gradient_norm" in summaries
        if norms:
            tf.summary.scalar(
                "global_norm/gradient_norm", tf.linalg.global_norm(list(zip(*gradients))[0])
            )
        if isinstance(clip_gradients, float):
            grads, gvars = zip(*gradients)
            gradients = list(zip(tf.clip_by_global_norm(grads, clip_gradients)[0], gvars))
        elif callable(clip_gradients):
            gradients = clip_gradients(gradients)
        elif clip_gradients is not None:
            raise ValueError(f"Unknown type {type(clip_gradients)} for clip_gradients")
        if "loss" in summaries:
            tf.summary.scalar("loss", loss)
        for gradient, variable in gradients:
            values = gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient
            if values is not None:
                var_name = variable.name.replace(":", "_")
                if "gradients" in summaries:
                    tf.summary.histogram(f"gradients/{var_name}", values)
                if "gradient_norm" in summaries:
                    tf.summary.scalar(f"gradient_norm/{var_name}", tf.linalg.global_norm([values]))
        if clip_gradients is not None and norms:
            tf.summary.scalar(
                "global_norm/clipped_gradient_norm",
                tf.linalg.global_norm(list(zip(*gradients))[0]),
            )
        grad_updates = opt.apply_gradients(
            gradients, global_step=global_step if increment_global_step else None, name="train"
        )
        with tf.control_dependencies([grad_updates]):
            return tf.identity(loss)
