"""A check that a distribution strategy's replicas still hold the same model after a step.

``MirroredStrategy`` keeps one copy of each variable per replica. ``tf.compat.v1.train``
optimizers sum the replicas' gradients and update every copy alike; a train op that assigns
variables itself (the ``AdamWeightDecayOptimizer`` of BERT's ``optimization.py``, a
hand-written SGD step) updates each replica's own copy with that replica's gradient,
silently: the copies drift apart and the checkpoint keeps one of them.
``run_config(cpu_replicas=…)`` makes such a set-up easy to reach, so the fallback
``TPUEstimator`` checks the copies once, after the first step.
"""

from __future__ import annotations

from typing import Any

from tfest_kit._tf import estimator, tf

__all__ = ["ReplicaSyncCheckHook"]


class ReplicaSyncCheckHook(estimator.SessionRunHook):
    """Raises after the first training step if the replicas' copies of a variable differ.

    Args:
      strategy: the ``train_distribute`` strategy the Estimator trains with.

    Example:

        hook = ReplicaSyncCheckHook(config.train_distribute)
        est.train(input_fn, max_steps=100, hooks=[hook])
    """

    def __init__(self, strategy: Any) -> None:
        self._strategy = strategy
        self._gaps: dict = {}
        self._replicas = 1
        self._checked = False

    def begin(self) -> None:
        self._gaps = {}
        for variable in tf.trainable_variables():
            copies = self._strategy.experimental_local_results(variable)
            if len(copies) > 1:
                self._replicas = len(copies)
                first = tf.convert_to_tensor(copies[0])
                self._gaps[variable.op.name] = tf.reduce_max(
                    [tf.reduce_max(tf.abs(first - copy)) for copy in copies[1:]]
                )
        self._checked = not self._gaps

    def after_run(self, run_context, run_values) -> None:
        if self._checked:
            return
        self._checked = True
        gaps = run_context.session.run(self._gaps)
        # Exactly equal: every copy applies the same summed gradient with the same kernel.
        apart = sorted(name for name, gap in gaps.items() if gap > 0)
        if apart:
            more = f" and {len(apart) - 3} more" if len(apart) > 3 else ""
            raise ValueError(
                f"After the first step the {self._replicas} replicas hold different values of "
                f"{', '.join(apart[:3])}{more}: the train op updates each replica's copy with "
                "that replica's own gradient, so the copies drift apart. An apply_gradients "
                "that assigns variables itself (the AdamWeightDecayOptimizer of BERT's "
                "optimization.py, a hand-written update) does this; use a "
                "tf.compat.v1.train optimizer (tfest_kit.model_fn.AdamWeightDecayOptimizer is "
                "one), or train without cpu_replicas / train_distribute."
            )
