"""A hook that fails an evaluation that would never end, or that ran on no data."""

from __future__ import annotations

from typing import Optional

from tfest_kit._tf import tf

__all__ = ["EvalGuard"]


class EvalGuard(tf.train.SessionRunHook):
    """Fails an evaluation that would run forever or that ran no batch (its metrics: zeros).

    Estimator's own evaluation reads a ``repeat()``ed Dataset forever when it has no step
    count, and reports zeros for no data at all, both without a word.

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
        if not self._cardinalities:
            return
        if tf.data.experimental.INFINITE_CARDINALITY in session.run(self._cardinalities):
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

    def end(self, session) -> None:
        if self._batches == 0:
            raise ValueError(
                f"`{self._input_arg}` yielded no batch: the evaluation ran on nothing and would "
                "report zeros. Check that the eval data is not empty (files, filters, "
                "`take()`). Got: 0 batches"
            )
