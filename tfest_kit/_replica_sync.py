"""A check that a strategy's replicas still hold the same model after the first step.

A train op that assigns variables itself (BERT's ``AdamWeightDecayOptimizer``, a hand-written
SGD step) updates each ``MirroredStrategy`` replica's copy with that replica's own gradient,
silently: the copies drift apart and the checkpoint keeps one of them.
"""

from __future__ import annotations

from typing import Any

from tfest_kit._tf import estimator, tf


class ReplicaSyncCheckHook(estimator.SessionRunHook):
    """Raises after the first training step if the replicas' copies of a variable differ."""

    def __init__(self, strategy: Any) -> None:
        self._strategy = strategy

    def begin(self) -> None:
        self._gaps, self._replicas = {}, 1
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
        # Exactly equal: every copy applies the same summed gradient with the same kernel.
        apart = sorted(k for k, gap in run_context.session.run(self._gaps).items() if gap > 0)
        if apart:
            more = f" and {len(apart) - 3} more" if len(apart) > 3 else ""
            raise ValueError(
                f"After the first step the {self._replicas} replicas hold different values of "
                f"{', '.join(apart[:3])}{more}: the train op updates each replica's copy with "
                "that replica's own gradient (an apply_gradients that assigns variables itself, "
                "e.g. BERT's AdamWeightDecayOptimizer). Use a tf.compat.v1.train optimizer "
                "(tfest_kit.model_fn.AdamWeightDecayOptimizer is one), or train without "
                "cpu_replicas / train_distribute."
            )
