"""A hook that fails an evaluation that would never end or ran on no data; says how far it is."""

from __future__ import annotations

import time
from typing import Optional

from tfest_kit._tf import tf

__all__ = ["EvalGuard"]


class EvalGuard(tf.train.SessionRunHook):
    """Fails an evaluation that would run forever or ran no batch (Estimator reads a repeated
    Dataset forever without ``steps``, and reports zeros for no data); says how far it is every
    10 s, and that ``steps`` bounds an input of unknown length after 100, 1,000, … batches.
    ``steps_arg`` / ``input_arg``: the caller's names of ``steps`` and ``input_fn``."""

    def __init__(self, steps: Optional[int], steps_arg: str, input_arg: str) -> None:
        self._steps, self._steps_arg, self._input_arg = steps, steps_arg, input_arg

    def begin(self) -> None:
        self._batches = 0
        self._next_report = None  # the batch count of the next progress line, if any
        # Estimator feeds a returned Dataset through an initializable iterator (MakeIterator).
        self._cardinalities = [
            tf.raw_ops.DatasetCardinality(input_dataset=op.inputs[0])
            for op in tf.get_default_graph().get_operations()
            if op.type == "MakeIterator" and self._steps is None
        ]

    def after_create_session(self, session, coord) -> None:
        cardinalities = session.run(self._cardinalities) if self._cardinalities else []
        self._total, self._said_at = self._steps, time.monotonic()
        if self._steps is None and cardinalities and min(cardinalities) >= 0:
            self._total = min(cardinalities)
        tf.logging.info("Evaluating %s batches", self._total or "all")
        if tf.data.experimental.INFINITE_CARDINALITY in cardinalities:
            raise ValueError(
                f"`{self._input_arg}` repeats forever and `{self._steps_arg}=None` evaluates "
                f"until the data ends: pass `{self._steps_arg}=N` or do not repeat the eval data."
            )
        # Without a Dataset (queues, a one-shot iterator) the length is unknown too.
        if self._steps is None and (not cardinalities or min(cardinalities) < 0):
            self._next_report = 100

    def after_run(self, run_context, run_values) -> None:
        self._batches += 1
        if time.monotonic() - self._said_at >= 10:
            self._said_at = time.monotonic()
            of = f" of {self._total}" if self._total else ""
            tf.logging.info("Evaluation: batch %d%s", self._batches, of)
        if self._batches == self._next_report:
            self._next_report *= 10  # a long honest pass says it rarely
            tf.logging.warning(
                "Evaluation: %d batches so far, and `%s` (of unknown length) has not ended yet: "
                "pass `%s=N` to bound it.",
                self._batches,
                self._input_arg,
                self._steps_arg,
            )

    def end(self, session) -> None:
        if self._batches == 0:
            raise ValueError(
                f"`{self._input_arg}` yielded no batch: the evaluation would report zeros. "
                "Check that the eval data is not empty."
            )
