"""``tf.contrib.layers.batch_norm`` (also ``tf.contrib.slim.batch_norm``), a port of TF 1.15's.

``tf_slim`` 1.1's copy cannot run on TensorFlow 2.15: its fused path reads ``ops.Tensor``, which
left ``tensorflow.python.framework.ops``, and its other path loads the ``tf_keras`` package.
This is the same computation on public ops: ``tf.nn.fused_batch_norm`` for inputs of rank 2 or
4 (as TF 1.15 did, with its Bessel-corrected batch variance feeding the moving average),
``tf.nn.moments`` otherwise, the same arguments and defaults, and the same variables
(``BatchNorm/beta``, ``/gamma``, ``/moving_mean``, ``/moving_variance``, model variables), so
TF 1.15 checkpoints restore.  Updates go to ``updates_collections`` (``UPDATE_OPS``) or, with
``None``, run with the output, as in TF 1.15.

Example:

    net = tf.contrib.layers.batch_norm(net, decay=0.9, is_training=is_training, scale=True)
"""

from __future__ import annotations

from typing import Any, Optional

import tf_slim

from tfest_kit._tf import tf

__all__ = ["batch_norm"]


@tf_slim.add_arg_scope
def batch_norm(
    inputs,
    decay: float = 0.999,
    center: bool = True,
    scale: bool = False,
    epsilon: float = 0.001,
    activation_fn: Any = None,
    param_initializers: Optional[dict] = None,
    param_regularizers: Optional[dict] = None,
    updates_collections: Any = tf.GraphKeys.UPDATE_OPS,
    is_training: Any = True,
    reuse: Any = None,
    variables_collections: Any = None,
    outputs_collections: Any = None,
    trainable: bool = True,
    batch_weights: Any = None,
    fused: Optional[bool] = None,
    data_format: str = "NHWC",
    zero_debias_moving_mean: bool = False,
    scope: Any = None,
    renorm: bool = False,
    renorm_clipping: Any = None,
    renorm_decay: float = 0.99,
    adjustment: Any = None,
):
    """``tf.contrib.layers.batch_norm`` as TF 1.15 had it (``fused`` only picks the kernel).

    Args:
      inputs: a tensor of rank >= 2, channels last (``NHWC``) or, rank >= 3, ``NCHW``.
      decay: of the moving averages.
      center: add the ``beta`` offset variable.
      scale: multiply by the ``gamma`` variable.
      epsilon: added to the variance.
      activation_fn: applied to the output (``None``: linear).
      param_initializers: ``{"beta"|"gamma"|"moving_mean"|"moving_variance": initializer}``.
      param_regularizers: ``{"beta"|"gamma": regularizer}``.
      updates_collections: where the moving-average updates go; ``None`` runs them in place.
      is_training: a bool or a boolean tensor: batch statistics and updates, or the moving ones.
      reuse: reuse the scope's variables.
      variables_collections: extra collections, a list or a dict by variable name.
      outputs_collections: collections the output is added to.
      trainable: whether ``beta`` and ``gamma`` are trained.
      batch_weights: not served (left ``None``).
      fused: accepted; the computation is TF 1.15's either way.
      data_format: ``"NHWC"`` or ``"NCHW"``.
      zero_debias_moving_mean: not served (left ``False``).
      scope: variable scope; default ``BatchNorm``.
      renorm: not served (left ``False``).
      renorm_clipping: not served.
      renorm_decay: unused without ``renorm``.
      adjustment: not served.

    Returns:
      The normalized tensor, shaped as ``inputs``.

    Raises:
      ValueError: for an unknown rank or ``data_format``, or a batch-renormalization /
        weighted / debiased option, which this port does not carry.

    Example:

        net = batch_norm(net, is_training=True, updates_collections=None, scope="bn_0")
    """
    del fused, renorm_decay
    for name, given in (
        ("batch_weights", batch_weights is not None),
        ("zero_debias_moving_mean", zero_debias_moving_mean),
        ("renorm", renorm),
        ("renorm_clipping", renorm_clipping is not None),
        ("adjustment", adjustment is not None),
    ):
        if given:
            raise ValueError(
                f"tf.contrib.layers.batch_norm({name}=...) is not served by tfest_kit.legacy; "
                f"leave {name} at its default, or use tf.keras.layers.BatchNormalization."
            )
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format={data_format!r}: use 'NHWC' or 'NCHW'.")
    inputs = tf.convert_to_tensor(inputs)
    rank = inputs.shape.ndims
    if rank is None or rank < 2:
        raise ValueError(f"Inputs {inputs.name} has undefined rank or a rank below 2.")
    axis = 1 if data_format == "NCHW" else rank - 1
    initializers = param_initializers or {}
    regularizers = param_regularizers or {}
    dtype = inputs.dtype.base_dtype
    with tf.variable_scope(scope, "BatchNorm", [inputs], reuse=reuse) as sc:
        shape = inputs.shape[axis : axis + 1]

        def variable(name, default, train, regularize=True):
            return tf_slim.model_variable(
                name,
                shape=shape,
                dtype=dtype,
                initializer=initializers.get(name, default),
                regularizer=regularizers.get(name) if regularize else None,
                collections=tf_slim.utils.get_variable_collections(variables_collections, name),
                trainable=train,
            )

        zeros, ones = tf.zeros_initializer(), tf.ones_initializer()
        beta = variable("beta", zeros, trainable) if center else tf.zeros(shape, dtype)
        gamma = variable("gamma", ones, trainable) if scale else tf.ones(shape, dtype)
        moving_mean = variable("moving_mean", zeros, False, regularize=False)
        moving_variance = variable("moving_variance", ones, False, regularize=False)

        def normalize(training):
            if rank in (2, 4):
                x = inputs
                if rank == 2:  # as TF 1.15: [batch, 1, 1, channels]
                    x = tf.reshape(inputs, [-1, 1, 1, shape[0]])
                fmt = "NHWC" if rank == 2 else data_format
                if training:
                    y, mean, variance = tf.nn.fused_batch_norm(
                        x, gamma, beta, epsilon=epsilon, data_format=fmt
                    )
                else:
                    y, mean, variance = tf.nn.fused_batch_norm(
                        x,
                        gamma,
                        beta,
                        mean=moving_mean,
                        variance=moving_variance,
                        epsilon=epsilon,
                        is_training=False,
                        data_format=fmt,
                    )
                return tf.reshape(y, tf.shape(inputs)), mean, variance
            if training:
                axes = [i for i in range(rank) if i != axis]
                mean, variance = tf.nn.moments(inputs, axes)
            else:
                mean, variance = tf.identity(moving_mean), tf.identity(moving_variance)
            broadcast = [1] * rank
            broadcast[axis] = shape[0]

            def b(t):
                return tf.reshape(t, broadcast)

            y = tf.nn.batch_normalization(inputs, b(mean), b(variance), b(beta), b(gamma), epsilon)
            return y, mean, variance

        def update(mean, variance):
            # assign_moving_average without debiasing: var -= (var - value) * (1 - decay).
            return (
                moving_mean.assign_sub((moving_mean - mean) * (1.0 - decay)),
                moving_variance.assign_sub((moving_variance - variance) * (1.0 - decay)),
            )

        static = is_training if isinstance(is_training, bool) else None
        if static is None and not isinstance(is_training, tf.Variable):
            static = tf.get_static_value(is_training)
        if static is not None:
            outputs, mean, variance = normalize(bool(static))
            updates = update(mean, variance) if static else None
        else:
            outputs, mean, variance = tf.cond(
                is_training, lambda: normalize(True), lambda: normalize(False)
            )
            updates = tf.cond(
                is_training,
                lambda: update(mean, variance),
                lambda: (tf.identity(moving_mean), tf.identity(moving_variance)),
            )
        if updates is not None:
            if updates_collections is None:
                with tf.control_dependencies(list(updates)):
                    outputs = tf.identity(outputs)
            else:
                for op in updates:
                    tf.add_to_collections(updates_collections, op)
        outputs.set_shape(inputs.shape)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return tf_slim.utils.collect_named_outputs(outputs_collections, sc.name, outputs)
