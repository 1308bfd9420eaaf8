"""``tf.contrib.slim.learning``: tf_slim 1.1's, with the gradient helpers that run on TF 2.15.

tf_slim 1.1's ``multiply_gradients``, ``clip_gradient_norms`` and ``add_gradients_summaries``
test ``isinstance(…, ops.Tensor / ops.IndexedSlices)``, names TensorFlow 2.15's
``tensorflow.python.framework.ops`` no longer has, so ``create_train_op(…,
gradient_multipliers=…, clip_gradient_norm=…, summarize_gradients=True)`` stopped with an
``AttributeError``.  These are TF 1.15's functions on the public ``tf.Tensor`` /
``tf.IndexedSlices``, and ``create_train_op`` is TF 1.15's: the gradient transforms around
``tf_slim.training.create_train_op``.  Everything else (``train``, ``train_step`` …) is
``tf_slim.learning``'s.

Example:

    train_op = slim.learning.create_train_op(
        loss, optimizer, gradient_multipliers={"logits/weights": 10.0})
"""

from __future__ import annotations

from typing import Any

import tf_slim.learning as _learning
import tf_slim.training as _training

from tfest_kit._tf import tf

__all__ = [
    "multiply_gradients",
    "clip_gradient_norms",
    "add_gradients_summaries",
    "create_train_op",
]

_USE_GLOBAL_STEP = 0


def __getattr__(name: str) -> Any:
    # The rest of slim.learning (train, train_step …) is tf_slim's.
    return getattr(_learning, name)


def clip_gradient_norms(gradients_to_variables: list, max_norm: float) -> list:
    """Clips each gradient to ``max_norm`` (``tf.clip_by_norm``; an ``IndexedSlices``' values).

    Example:

        grads = clip_gradient_norms(optimizer.compute_gradients(loss), 5.0)
    """
    clipped = []
    for grad, var in gradients_to_variables:
        if grad is not None:
            if isinstance(grad, tf.IndexedSlices):
                values = tf.clip_by_norm(grad.values, max_norm)
                grad = tf.IndexedSlices(values, grad.indices, grad.dense_shape)
            else:
                grad = tf.clip_by_norm(grad, max_norm)
        clipped.append((grad, var))
    return clipped


def multiply_gradients(grads_and_vars: list, gradient_multipliers: dict) -> list:
    """Scales the gradients of the variables ``gradient_multipliers`` names (or holds).

    Args:
      grads_and_vars: a list of ``(gradient, variable)`` pairs.
      gradient_multipliers: ``{variable or its op name: factor}``.

    Returns:
      The list of pairs, those variables' gradients multiplied.

    Raises:
      ValueError: as TF 1.15's, if ``grads_and_vars`` is not a list, ``gradient_multipliers``
        is empty or not a dict, or a multiplied gradient is None.

    Example:

        grads = multiply_gradients(grads, {"logits/weights": 10.0})
    """
    if not isinstance(grads_and_vars, list):
        raise ValueError("`grads_and_vars` must be a list.")
    if not gradient_multipliers:
        raise ValueError("`gradient_multipliers` is empty.")
    if not isinstance(gradient_multipliers, dict):
        raise ValueError("`gradient_multipliers` must be a dict.")
    multiplied = []
    for grad, var in grads_and_vars:
        if var in gradient_multipliers or var.op.name in gradient_multipliers:
            key = var if var in gradient_multipliers else var.op.name
            if grad is None:
                raise ValueError("Requested multiple of `None` gradient.")
            multiplier = gradient_multipliers[key]
            if not isinstance(multiplier, tf.Tensor):
                multiplier = tf.constant(multiplier, dtype=grad.dtype)
            if isinstance(grad, tf.IndexedSlices):
                grad = tf.IndexedSlices(grad.values * multiplier, grad.indices, grad.dense_shape)
            else:
                grad *= multiplier
        multiplied.append((grad, var))
    return multiplied


def add_gradients_summaries(grads_and_vars: list) -> list:
    """A histogram ``<var>/gradient`` and a scalar ``<var>/gradient_norm`` per gradient.

    Example:

        summaries = add_gradients_summaries(grads)
    """
    summaries = []
    for grad, var in grads_and_vars:
        if grad is None:
            tf.logging.info("Var %s has no gradient", var.op.name)
            continue
        values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
        summaries.append(tf.summary.histogram(var.op.name + "/gradient", values))
        summaries.append(
            tf.summary.scalar(var.op.name + "/gradient_norm", tf.linalg.global_norm([values]))
        )
    return summaries


def create_train_op(
    total_loss: Any,
    optimizer: Any,
    global_step: Any = _USE_GLOBAL_STEP,
    update_ops: Any = None,
    variables_to_train: Any = None,
    clip_gradient_norm: float = 0,
    summarize_gradients: bool = False,
    gate_gradients: int = tf.train.Optimizer.GATE_OP,
    aggregation_method: Any = None,
    colocate_gradients_with_ops: bool = False,
    gradient_multipliers: Any = None,
    check_numerics: bool = True,
):
    """``slim.learning.create_train_op``: the update op, returning the loss (TF 1.15's).

    Args:
      total_loss: the loss tensor.
      optimizer: a ``tf.compat.v1.train.Optimizer``.
      global_step: incremented by the update; default the graph's.
      update_ops: run before the update (default ``UPDATE_OPS``).
      variables_to_train: default all trainable variables.
      clip_gradient_norm: if > 0, each gradient is clipped to that norm.
      summarize_gradients: add ``<var>/gradient`` and ``<var>/gradient_norm`` summaries.
      gate_gradients: as ``Optimizer.compute_gradients``.
      aggregation_method: as ``Optimizer.compute_gradients``.
      colocate_gradients_with_ops: as ``Optimizer.compute_gradients``.
      gradient_multipliers: ``{variable or its op name: factor}`` scaling those gradients.
      check_numerics: check the loss for NaN / Inf.

    Returns:
      A tensor that runs the update and evaluates to the loss.

    Example:

        train_op = create_train_op(loss, tf.train.MomentumOptimizer(0.01, 0.9),
                                   gradient_multipliers={"logits/weights": 10.0})
    """

    def transform_grads_fn(grads):
        if gradient_multipliers:
            with tf.name_scope("multiply_grads"):
                grads = multiply_gradients(grads, gradient_multipliers)
        if clip_gradient_norm > 0:
            with tf.name_scope("clip_grads"):
                grads = clip_gradient_norms(grads, clip_gradient_norm)
        # tf_slim.training's own summaries use its broken add_gradients_summaries: ours here,
        # at the same point (after the transforms).
        if summarize_gradients:
            with tf.name_scope("summarize_grads"):
                add_gradients_summaries(grads)
        return grads

    return _training.create_train_op(
        total_loss=total_loss,
        optimizer=optimizer,
        global_step=(
            tf.train.get_or_create_global_step() if global_step is _USE_GLOBAL_STEP else global_step
        ),
        update_ops=update_ops,
        variables_to_train=variables_to_train,
        transform_grads_fn=transform_grads_fn,
        summarize_gradients=False,
        gate_gradients=gate_gradients,
        aggregation_method=aggregation_method,
        colocate_gradients_with_ops=colocate_gradients_with_ops,
        check_numerics=check_numerics,
    )
