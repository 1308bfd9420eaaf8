"""A hook that fails an evaluation that would never end or ran on no data; says how far it is."""

from __future__ import annotations

from typing import Optional

from tfest_kit._tf import tf

__all__ = ["EvalGuard"]

# Batches before the first progress line of an evaluation of unknown length (then x10).
_FIRST_REPORT = 100


class EvalGuard(tf.train.SessionRunHook):
    """Fails an evaluation that would run forever or that ran no batch (its metrics: zeros).

    Estimator's own evaluation reads a ``repeat()``ed Dataset forever when it has no step
    count, and reports zeros for no data at all, both without a word. With no step count and
    an input of unknown length (a generator-based Dataset, which may never end), a line after
    100, 1,000, 10,000 … batches says how many were evaluated and that ``steps`` bounds it.

    Args:
      steps: the evaluation's step count; with None it runs until the data ends.
      steps_arg: the name of that argument in the caller's API, for the messages.
      input_arg: the name of the caller's input_fn argument, for the messages.

    Example:

        est.evaluate(input_fn, hooks=[EvalGuard(None, "steps", "input_fn")])
    """

    def __init__(self, steps: Optional[int], steps_arg: str, input_arg: str) -> None:
        self._steps = steps
        self._steps_arg = steps_arg
        self._input_arg = input_arg

    def begin(self) -> None:
        self._batches = 0
        self._next_report = None  # the batch count of the next progress line, if any
        self._cardinalities = []
        if self._steps is None:
            # Estimator feeds a returned Dataset through an initializable iterator (MakeIterator);
            # the official loop would read a repeat()ed one forever, with no error and no log.
            self._cardinalities = [
                tf.raw_ops.DatasetCardinality(input_dataset=op.inputs[0])
                for op in tf.get_default_graph().get_operations()
                if op.type == "MakeIterator"
            ]

    def after_create_session(self, session, coord) -> None:
        cardinalities = session.run(self._cardinalities) if self._cardinalities else []
        if self._steps is None:
            # Without a Dataset (queues, a one-shot iterator) the length is unknown too.
            known = cardinalities and min(cardinalities) >= 0
            self._next_report = None if known else _FIRST_REPORT
        if tf.data.experimental.INFINITE_CARDINALITY in cardinalities:
            steps, data = self._steps_arg, self._input_arg
            raise ValueError(
                f"`{data}` repeats forever (its Dataset has infinite cardinality, e.g. "
                f"`.repeat()` or `num_epochs=None`) and `{steps}=None` evaluates until the data "
                "ends, so the evaluation would never finish. Do not repeat the eval data (e.g. "
                f"`num_epochs=1`), or pass `{steps}=N` batches. Got: {steps}=None and an "
                "infinite eval Dataset"
            )

    def after_run(self, run_context, run_values) -> None:
        self._batches += 1
        if self._batches == self._next_report:
            self._next_report *= 10  # a long honest pass says it rarely
            tf.logging.warning(
                "Evaluation: %d batches so far, and `%s` has not ended yet (its length is "
                "unknown, e.g. a generator): with `%s=None` the evaluation runs until the input "
                "ends. Pass `%s=N` to bound it to N batches.",
                self._batches,
                self._input_arg,
                self._steps_arg,
                self._steps_arg,
            )

    def end(self, session) -> None:
        if self._batches == 0:
            raise ValueError(
                f"`{self._input_arg}` yielded no batch: the evaluation ran on nothing and would "
                "report zeros. Check that the eval data is not empty (files, filters, "
                "`take()`). Got: 0 batches"
            )
