"""Optimizers by name, BERT's AdamWeightDecay and BERT's learning-rate schedule (model_fn)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Callable, Optional, Union

from tfest_kit._checks import check_int, check_number
from tfest_kit._tf import tf

OptimizerArg = Union[str, tf.train.Optimizer, Callable[..., tf.train.Optimizer]]


class AdamWeightDecayOptimizer(tf.train.Optimizer):
    """BERT's Adam with decoupled weight decay ("AdamW"), for ``tf.compat.v1`` graphs.

    As BERT's: no bias correction; no decay for names matching ``exclude_from_weight_decay``.

    Example:

        optimizer = AdamWeightDecayOptimizer(learning_rate=2e-5, weight_decay_rate=0.01)
    """

    def __init__(
        self,
        learning_rate,
        weight_decay_rate: float = 0.01,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        exclude_from_weight_decay: Optional[Sequence[str]] = ("LayerNorm", "layer_norm", "bias"),
        name: str = "AdamWeightDecay",
    ):
        super().__init__(use_locking=False, name=name)
        self._lr = learning_rate
        self._weight_decay_rate = weight_decay_rate
        self._beta_1 = beta_1
        self._beta_2 = beta_2
        self._epsilon = epsilon
        self._exclude = list(exclude_from_weight_decay or ())

    def _create_slots(self, var_list):
        for var in var_list:
            self._zeros_slot(var, "m", self._name)
            self._zeros_slot(var, "v", self._name)

    def _apply_dense(self, grad, var):
        return self._apply(grad, var)

    _resource_apply_dense = _apply_dense

    def _apply_sparse(self, grad, var):  # sparse gradients are densified
        return self._apply(tf.convert_to_tensor(grad), var)

    def _resource_apply_sparse(self, grad, var, indices):
        return self._apply(tf.math.unsorted_segment_sum(grad, indices, tf.shape(var)[0]), var)

    def _apply(self, grad, var):
        m = self.get_slot(var, "m")
        v = self.get_slot(var, "v")
        grad = tf.cast(grad, var.dtype.base_dtype)
        lr = tf.cast(self._lr, var.dtype.base_dtype)
        next_m = self._beta_1 * m + (1.0 - self._beta_1) * grad
        next_v = self._beta_2 * v + (1.0 - self._beta_2) * tf.square(grad)
        update = next_m / (tf.sqrt(next_v) + self._epsilon)
        if self._weight_decay_rate and not any(
            re.search(pattern, var.op.name) for pattern in self._exclude
        ):
            # Decoupled: added to the update, not the loss, so Adam's moments never see it.
            update += self._weight_decay_rate * var
        return tf.group(
            tf.assign(var, var - lr * update), tf.assign(m, next_m), tf.assign(v, next_v)
        )


OPTIMIZERS: dict[str, Callable[..., tf.train.Optimizer]] = {
    "adam": lambda lr: tf.train.AdamOptimizer(lr),
    "adamw": lambda lr: AdamWeightDecayOptimizer(lr),
    "sgd": lambda lr: tf.train.GradientDescentOptimizer(lr),
    "momentum": lambda lr: tf.train.MomentumOptimizer(lr, momentum=0.9),
    "adagrad": lambda lr: tf.train.AdagradOptimizer(lr),
    "rmsprop": lambda lr: tf.train.RMSPropOptimizer(lr),
}


def check_optimizer(optimizer: OptimizerArg, learning_rate, warmup_steps, decay_steps) -> None:
    """Refuses an unknown name, a bad schedule, and an instance with a schedule it would ignore."""
    if isinstance(optimizer, str) and optimizer.lower() not in OPTIMIZERS:
        raise ValueError(f"`optimizer` must be one of {sorted(OPTIMIZERS)}. Got: {optimizer!r}")
    if isinstance(optimizer, tf.train.Optimizer) and (
        learning_rate is not None or warmup_steps or decay_steps is not None
    ):
        raise ValueError(
            "`learning_rate`, `warmup_steps` and `decay_steps` need `optimizer` as a name or "
            f"a callable: an Optimizer instance trains with its own rate. Got: {optimizer!r}"
        )
    check_number("learning_rate", 1e-3 if learning_rate is None else learning_rate)
    check_int("warmup_steps", warmup_steps, 0)
    check_int("decay_steps", decay_steps, allow_none=True)


def learning_rate_schedule(learning_rate: float, global_step, warmup_steps: int, decay_steps):
    """BERT's schedule: linear warm-up from 0, then linear decay to 0 at ``decay_steps``
    (counted from step 0, as in BERT)."""
    step = tf.cast(global_step, tf.float32)
    lr = tf.constant(float(learning_rate), tf.float32)
    if decay_steps is not None:
        lr = lr * tf.maximum(0.0, 1.0 - tf.minimum(step, float(decay_steps)) / decay_steps)
    if warmup_steps:
        lr = tf.where(step < warmup_steps, float(learning_rate) * step / warmup_steps, lr)
    return tf.identity(lr, name="scheduled_learning_rate")  # the summary is "learning_rate"


def make_optimizer(optimizer: OptimizerArg, learning_rate) -> tf.train.Optimizer:
    if isinstance(optimizer, str):
        return OPTIMIZERS[optimizer.lower()](learning_rate)
    if isinstance(optimizer, tf.train.Optimizer):
        return optimizer
    return optimizer(learning_rate)
