"""``tf.contrib.opt``'s AdamW and LazyAdam optimizers, a port of TF 1.15's.

``AdamWOptimizer`` and ``MomentumWOptimizer`` are TF 1.15's ``tf.train`` optimizers with
decoupled weight decay (Loshchilov & Hutter): before each variable's update,
``var -= weight_decay * var`` (not scaled by the learning rate, as in TF 1.15: schedule both
together yourself), for the variables in ``decay_var_list`` (default: all).  Their slots and
accumulators are the base optimizer's under the names TF 1.15 gave (``w/AdamW``,
``w/AdamW_1``, ``beta1_power`` …), so TF 1.15 checkpoints restore.  Keras' ``AdamW``
is a Keras optimizer, which a ``tf.train``-style ``model_fn`` cannot use.

``MovingAverageOptimizer`` is TF 1.15's wrapper on ``tf.compat.v1.train.ExponentialMovingAverage``:
each step also updates ``<var>/ExponentialMovingAverage``, and ``swapping_saver()`` saves the
averages under the variables' names (and restores them into the variables).

``LazyAdamOptimizer`` is TF 1.15's: Adam whose sparse updates (an embedding's gathered rows)
touch only those rows of the variable and of its ``m`` / ``v`` slots; dense gradients get
plain Adam.  Its slots keep Adam's names (``emb/Adam``, ``emb/Adam_1``).

Example:

    optimizer = tf.contrib.opt.AdamWOptimizer(weight_decay=1e-4, learning_rate=1e-3)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
"""

from __future__ import annotations

from typing import Any, Optional

from tfest_kit._tf import tf

__all__ = [
    "DecoupledWeightDecayExtension",
    "extend_with_decoupled_weight_decay",
    "AdamWOptimizer",
    "MomentumWOptimizer",
    "LazyAdamOptimizer",
    "MovingAverageOptimizer",
    "BACKING",
    "NOT_SERVED",
]

_PORT = "tf.compat.v1.train optimizers (tfest_kit.legacy.contrib.opt, a port of TF 1.15's)"
BACKING = {name: _PORT for name in __all__[:5]}
BACKING["MovingAverageOptimizer"] = (
    "tf.compat.v1.train.ExponentialMovingAverage (tfest_kit.legacy.contrib.opt, a port)"
)
NOT_SERVED = {
    "LARSOptimizer": "tf.compat.v1.train.MomentumOptimizer with per-layer learning rates",
    "ScipyOptimizerInterface": "scipy.optimize.minimize on values read with a tf.Session",
}


class DecoupledWeightDecayExtension:
    """Mixin adding decoupled weight decay to a ``tf.compat.v1.train.Optimizer``.

    Args:
      weight_decay: the decay factor (a float, a tensor or a callable returning one).
      **kwargs: the base optimizer's arguments.

    Example:

        class MyAdamW(DecoupledWeightDecayExtension, tf.train.AdamOptimizer):
            pass
    """

    def __init__(self, weight_decay: Any, **kwargs: Any):
        self._weight_decay = weight_decay
        self._decay_var_list: Any = None
        super().__init__(**kwargs)

    def minimize(self, loss, global_step=None, var_list=None, *args, decay_var_list=None, **kw):
        """As ``Optimizer.minimize``; ``decay_var_list`` limits which variables decay."""
        self._decay_var_list = set(decay_var_list) if decay_var_list else None
        return super().minimize(loss, global_step, var_list, *args, **kw)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None, decay_var_list=None):
        """As ``Optimizer.apply_gradients``, each variable decayed first."""
        if decay_var_list:
            self._decay_var_list = set(decay_var_list)
        grads_and_vars = list(grads_and_vars)
        decay = self._weight_decay() if callable(self._weight_decay) else self._weight_decay
        decays = []
        # The gradients first, from the values before the decay (unordered, a gradient that
        # reads its variable could see the decayed value).
        computed = [
            g.values if isinstance(g, tf.IndexedSlices) else g
            for g, _ in grads_and_vars
            if g is not None
        ]
        with tf.name_scope("weight_decay"), tf.control_dependencies(computed):
            for grad, var in grads_and_vars:
                if grad is None or (self._decay_var_list and var not in self._decay_var_list):
                    continue
                factor = tf.cast(decay, var.dtype.base_dtype)
                if isinstance(grad, tf.IndexedSlices):  # only the rows being updated
                    rows = tf.gather(var, grad.indices)
                    decays.append(var.scatter_sub(tf.IndexedSlices(factor * rows, grad.indices)))
                else:
                    decays.append(var.assign_sub(factor * var))
        with tf.control_dependencies(decays):
            return super().apply_gradients(grads_and_vars, global_step=global_step, name=name)


def extend_with_decoupled_weight_decay(base_optimizer: type) -> type:
    """``tf.contrib.opt.extend_with_decoupled_weight_decay``: ``base`` with weight decay.

    Returns:
      A class taking ``(weight_decay, *base arguments)``.

    Example:

        AdamW = extend_with_decoupled_weight_decay(tf.train.AdamOptimizer)
        optimizer = AdamW(weight_decay=1e-4, learning_rate=1e-3)
    """

    class OptimizerWithDecoupledWeightDecay(DecoupledWeightDecayExtension, base_optimizer):
        def __init__(self, weight_decay, *args, **kwargs):
            base_optimizer.__init__(self, *args, **kwargs)
            self._weight_decay = weight_decay
            self._decay_var_list = None

    return OptimizerWithDecoupledWeightDecay


class AdamWOptimizer(DecoupledWeightDecayExtension, tf.train.AdamOptimizer):
    """``tf.contrib.opt.AdamWOptimizer``: Adam with decoupled weight decay (slots ``…/AdamW``).

    Example:

        optimizer = AdamWOptimizer(weight_decay=1e-4, learning_rate=1e-3)
    """

    def __init__(
        self,
        weight_decay: Any,
        learning_rate: Any = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        use_locking: bool = False,
        name: str = "AdamW",
    ):
        super().__init__(
            weight_decay,
            learning_rate=learning_rate,
            beta1=beta1,
            beta2=beta2,
            epsilon=epsilon,
            use_locking=use_locking,
            name=name,
        )


class MomentumWOptimizer(DecoupledWeightDecayExtension, tf.train.MomentumOptimizer):
    """``tf.contrib.opt.MomentumWOptimizer``: momentum with decoupled weight decay.

    Example:

        optimizer = MomentumWOptimizer(1e-4, learning_rate=0.1, momentum=0.9)
    """

    def __init__(
        self,
        weight_decay: Any,
        learning_rate: Any,
        momentum: Any,
        use_locking: bool = False,
        name: str = "MomentumW",
        use_nesterov: bool = False,
    ):
        super().__init__(
            weight_decay,
            learning_rate=learning_rate,
            momentum=momentum,
            use_locking=use_locking,
            name=name,
            use_nesterov=use_nesterov,
        )


class LazyAdamOptimizer(tf.train.AdamOptimizer):
    """``tf.contrib.opt.LazyAdamOptimizer``: Adam updating only the rows a sparse gradient has.

    The arguments and defaults are ``tf.train.AdamOptimizer``'s (``name="Adam"``, as in
    TF 1.15), so are the slot names.  For a sparse gradient, the rows it indexes get
    ``m = beta1 * m + (1 - beta1) * g``, ``v = beta2 * v + (1 - beta2) * g * g`` and
    ``var -= lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon)``; other rows
    and their moments are left as they are.

    Example:

        optimizer = tf.contrib.opt.LazyAdamOptimizer(learning_rate=1e-3)
        train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    """

    def _lazy_update(self, grad, var, indices, scatter_update, scatter_sub):
        # TF 1.15's _apply_sparse_shared; the hyperparameter tensors and beta powers are the
        # ones AdamOptimizer._prepare / _create_slots made (names in _tf.PRIVATE_NAMES).
        dtype = var.dtype.base_dtype
        beta1_power, beta2_power = (tf.cast(p, dtype) for p in self._get_beta_accumulators())
        lr_t, beta1_t, beta2_t, epsilon_t = (
            tf.cast(t, dtype) for t in (self._lr_t, self._beta1_t, self._beta2_t, self._epsilon_t)
        )
        lr = lr_t * tf.sqrt(1 - beta2_power) / (1 - beta1_power)
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_t = scatter_update(m, indices, beta1_t * tf.gather(m, indices) + (1 - beta1_t) * grad)
        v_t = scatter_update(
            v, indices, beta2_t * tf.gather(v, indices) + (1 - beta2_t) * tf.square(grad)
        )
        m_slice, v_slice = tf.gather(m_t, indices), tf.gather(v_t, indices)
        var_update = scatter_sub(var, indices, lr * m_slice / (tf.sqrt(v_slice) + epsilon_t))
        return tf.group(var_update, m_t, v_t)

    def _apply_sparse(self, grad, var):
        def update(x, i, value):
            return tf.scatter_update(x, i, value, use_locking=self._use_locking)

        def sub(x, i, value):
            return tf.scatter_sub(x, i, value, use_locking=self._use_locking)

        return self._lazy_update(grad.values, var, grad.indices, update, sub)

    def _resource_apply_sparse(self, grad, var, indices):
        def update(x, i, value):
            with tf.control_dependencies(
                [tf.raw_ops.ResourceScatterUpdate(resource=x.handle, indices=i, updates=value)]
            ):
                return x.value()

        def sub(x, i, value):
            with tf.control_dependencies(
                [tf.raw_ops.ResourceScatterSub(resource=x.handle, indices=i, updates=value)]
            ):
                return x.value()

        return self._lazy_update(grad, var, indices, update, sub)


class MovingAverageOptimizer(tf.train.Optimizer):
    """``tf.contrib.opt.MovingAverageOptimizer``: ``opt`` plus a moving average of the variables.

    Each ``apply_gradients`` also runs ``tf.train.ExponentialMovingAverage(average_decay,
    num_updates).apply`` on the variables that got a gradient, creating TF 1.15's
    ``<var>/ExponentialMovingAverage`` variables.  Train with :meth:`swapping_saver`: it saves
    each average under its variable's name, so evaluation and export read the averages with a
    plain saver.

    Args:
      opt: the ``tf.compat.v1.train.Optimizer`` that computes and applies the gradients.
      average_decay: the decay of ``ExponentialMovingAverage``.
      num_updates: optional step count; the decay is then ``min(average_decay,
        (1 + num_updates) / (10 + num_updates))``.
      sequential_update: if True, average after the gradient update; if False, at the same
        time (reading either value).

    Raises:
      TypeError: if ``opt`` is not a ``tf.compat.v1.train.Optimizer``.

    Example:

        opt = tf.contrib.opt.MovingAverageOptimizer(tf.train.MomentumOptimizer(0.1, 0.9))
        train_op = opt.minimize(loss, global_step=tf.train.get_global_step())
        saver = opt.swapping_saver()   # after minimize
    """

    def __init__(
        self,
        opt: Any,
        average_decay: float = 0.9999,
        num_updates: Any = None,
        sequential_update: bool = True,
    ):
        if not isinstance(opt, tf.train.Optimizer):
            raise TypeError(
                "MovingAverageOptimizer: `opt` must be a tf.compat.v1.train.Optimizer "
                f"(e.g. tf.train.MomentumOptimizer(0.1, 0.9)). Got: {opt!r}"
            )
        super().__init__(use_locking=False, name="MovingAverageOptimizer")
        self._optimizer = opt
        self._ema = tf.train.ExponentialMovingAverage(average_decay, num_updates=num_updates)
        self._variable_map: Optional[dict] = None
        self._sequential_update = sequential_update

    def compute_gradients(self, *args: Any, **kwargs: Any):
        """The wrapped optimizer's ``compute_gradients``."""
        return self._optimizer.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The wrapped optimizer's update, then the moving averages (op ``train_with_avg``)."""
        grads_and_vars = list(grads_and_vars)
        train_op = self._optimizer.apply_gradients(
            grads_and_vars, global_step=global_step, name=name
        )
        var_list = [v for g, v in grads_and_vars if g is not None]
        self._variable_map = {}
        if self._sequential_update:
            with tf.control_dependencies([train_op]):
                ma_op = self._ema.apply(var_list)
        else:
            ma_op = self._ema.apply(var_list)
        for var in var_list:
            average = self._ema.average(var)
            self._variable_map[var.op.name] = average
            self._variable_map[average.op.name] = var
        return tf.group(train_op, ma_op, name="train_with_avg")

    def swapping_saver(self, var_list: Any = None, name: str = "swapping_saver", **kwargs: Any):
        """A ``tf.train.Saver`` that swaps each variable with its moving average.

        Args:
          var_list: variables (a list, or a dict by checkpoint name) to save; default all
            global variables.
          name: the saver's name.
          **kwargs: ``tf.train.Saver``'s other arguments.

        Returns:
          A ``tf.compat.v1.train.Saver``: the checkpoint holds each average under its
          variable's name (and the variable under its average's), and restoring it puts the
          averages into the variables.

        Raises:
          RuntimeError: if ``minimize`` / ``apply_gradients`` has not been called yet.

        Example:

            scaffold = tf.train.Scaffold(saver=opt.swapping_saver())
        """
        if self._variable_map is None:
            raise RuntimeError(
                "Must call apply_gradients or minimize before creating the swapping_saver"
            )
        if var_list is None:
            var_list = tf.global_variables()
        if not isinstance(var_list, dict):
            var_list = {var.op.name: var for var in var_list}
        swapped = {key: self._variable_map.get(var.op.name, var) for key, var in var_list.items()}
        return tf.train.Saver(swapped, name=name, **kwargs)
