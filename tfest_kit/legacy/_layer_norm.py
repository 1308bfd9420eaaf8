"""``tf.contrib.layers.layer_norm`` as TensorFlow 1.15 defined it, on ``tf.compat.v1``.

TensorFlow 2.15 has no layer with the same variable names: released BERT checkpoints hold
``bert/embeddings/LayerNorm/gamma`` and ``…/LayerNorm/beta``, which this function creates with
``tf.compat.v1.get_variable`` inside a ``LayerNorm`` variable scope, with the original's
epsilon (1e-12; 1e-3 for float16) and its moments-then-batch-normalization arithmetic, so a
checkpoint written by TF1 code restores into it and the outputs match.

Example:

    from tfest_kit.legacy import layer_norm

    with tf.variable_scope("bert/embeddings"):
        out = layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1)
    # variables: bert/embeddings/LayerNorm/beta, bert/embeddings/LayerNorm/gamma
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

from tfest_kit._tf import tf

__all__ = ["layer_norm", "EPSILON", "EPSILON_FLOAT16"]

EPSILON = 1e-12
EPSILON_FLOAT16 = 1e-3


def _collections(variables_collections: Union[None, Sequence[str], dict], name: str) -> list[str]:
    # tf.contrib accepted a list for every variable or a dict keyed by variable name.
    if isinstance(variables_collections, dict):
        extra = variables_collections.get(name) or []
    else:
        extra = list(variables_collections or [])
    base = [tf.GraphKeys.GLOBAL_VARIABLES, tf.GraphKeys.MODEL_VARIABLES]
    return base + [c for c in extra if c not in base]


def layer_norm(
    inputs: Any,
    center: bool = True,
    scale: bool = True,
    activation_fn: Optional[Callable[[Any], Any]] = None,
    reuse: Optional[bool] = None,
    variables_collections: Union[None, Sequence[str], dict] = None,
    outputs_collections: Optional[Sequence[str]] = None,
    trainable: bool = True,
    begin_norm_axis: int = 1,
    begin_params_axis: int = -1,
    scope: Optional[str] = None,
) -> Any:
    """Layer normalisation with ``tf.contrib.layers.layer_norm``'s variables and arithmetic.

    Normalises over the axes ``begin_norm_axis:`` (the original's default, 1, means every axis
    but the batch axis; BERT passes ``-1``, the last axis), then scales by ``gamma`` and shifts
    by ``beta``, both of shape ``inputs.shape[begin_params_axis:]``.

    Args:
      inputs: a tensor of known rank whose ``begin_params_axis:`` dimensions are known.
      center: create ``beta`` (zeros) and add it.
      scale: create ``gamma`` (ones) and multiply by it.
      activation_fn: applied to the result when given.
      reuse: passed to the ``LayerNorm`` variable scope.
      variables_collections: extra collections for the variables (a list, or a dict keyed by
        ``"beta"`` / ``"gamma"``).
      outputs_collections: collections the output is added to.
      trainable: whether the variables are trainable.
      begin_norm_axis: first axis normalised over; negative counts from the end.
      begin_params_axis: first axis of the parameters' shape; negative counts from the end.
      scope: variable scope name; ``None`` uses ``"LayerNorm"`` (made unique per call, as TF1
        did: a second call in the same scope gets ``LayerNorm_1``).

    Returns:
      A tensor with the shape and dtype of ``inputs``.

    Raises:
      ValueError: if the rank of ``inputs`` is unknown, an axis is out of range, or the
        parameter shape is not fully defined.

    Example:

        with tf.variable_scope("attention/output"):
            y = layer_norm(x + residual, begin_norm_axis=-1, begin_params_axis=-1)
    """
    with tf.variable_scope(scope, "LayerNorm", [inputs], reuse=reuse):
        inputs = tf.convert_to_tensor(inputs)
        inputs_shape = inputs.shape
        rank = inputs_shape.ndims
        if rank is None:
            raise ValueError(
                f"`inputs` to layer_norm must have a known rank. Got: {inputs.name} with shape "
                f"{inputs_shape}"
            )
        dtype = inputs.dtype.base_dtype
        norm_axis = begin_norm_axis + rank if begin_norm_axis < 0 else begin_norm_axis
        if not 0 <= norm_axis < rank or not -rank <= begin_params_axis < rank:
            raise ValueError(
                "`begin_norm_axis` and `begin_params_axis` must be axes of `inputs` "
                f"(rank {rank}). Got: begin_norm_axis={begin_norm_axis}, "
                f"begin_params_axis={begin_params_axis}"
            )
        params_shape = inputs_shape[begin_params_axis:]
        if not params_shape.is_fully_defined():
            raise ValueError(
                "`inputs` to layer_norm must have fully defined dimensions from "
                f"`begin_params_axis` on. Got: shape {inputs_shape}, "
                f"begin_params_axis={begin_params_axis}"
            )
        beta = gamma = None
        if center:
            beta = tf.get_variable(
                "beta",
                shape=params_shape,
                dtype=dtype,
                initializer=tf.zeros_initializer(),
                collections=_collections(variables_collections, "beta"),
                trainable=trainable,
            )
        if scale:
            gamma = tf.get_variable(
                "gamma",
                shape=params_shape,
                dtype=dtype,
                initializer=tf.ones_initializer(),
                collections=_collections(variables_collections, "gamma"),
                trainable=trainable,
            )
        mean, variance = tf.nn.moments(inputs, list(range(norm_axis, rank)), keep_dims=True)
        epsilon = EPSILON_FLOAT16 if dtype == tf.float16 else EPSILON
        outputs = tf.nn.batch_normalization(
            inputs, mean, variance, offset=beta, scale=gamma, variance_epsilon=epsilon
        )
        outputs.set_shape(inputs_shape)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        if outputs_collections:
            tf.add_to_collections(outputs_collections, outputs)
        return outputs
