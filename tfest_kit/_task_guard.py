"""``train`` / ``evaluate`` called directly on a ``TF_CONFIG`` cluster task: one clear error;
``EvalGuard``, an evaluation that would never end or ran on no data.

TensorFlow raised a ``RunConfig`` repr on a ps or evaluator task, and on the chief or a worker
waited forever for the task's server, which only ``train_and_evaluate`` starts.
"""

import contextlib
import logging
import os
import time
from typing import Any, Optional

from tfest_kit import _model_dir
from tfest_kit._tf import tf
from tfest_kit.hooks import fill_progress_totals


def check_direct_call(config: Any, method: str) -> None:
    """Raises a ValueError naming the task if ``method`` cannot run on it by itself."""
    task_type = config.task_type
    jobs = config.cluster_spec.jobs if config.cluster_spec else []
    if not jobs and task_type != "evaluator":
        return  # one process
    fix = (
        f"Estimator.{method} cannot run by itself on task {task_type}:{config.task_id} of the "
        "TF_CONFIG cluster: call tfest_kit.train_and_evaluate on every task instead"
    )
    if task_type == "ps" or (method == "train" and task_type == "evaluator"):
        raise ValueError(f"{fix}. Got: task type {task_type!r}")
    if method != "train" or config.train_distribute is not None or not config.master:
        return  # a strategy starts its own servers
    tasks = sum(len(config.cluster_spec.job_tasks(job)) for job in jobs)
    if tasks > 1 and _model_dir.grpc_reachable(config.master) is False:
        raise ValueError(f"{fix} (it starts the task's server). Got: no server at {config.master}")


@contextlib.contextmanager
def guarded_train(estimator, hooks, max_steps=None, steps=None):
    """Checks the task, then holds model_dir (one writer, an intact checkpoint); yields hooks,
    their progress hooks told where training ends. A training whose input ends before the
    first step (Estimator returns silently) raises."""
    check_direct_call(estimator.config, "train")
    fill_progress_totals(hooks or (), max_steps, estimator, steps)
    logger = tf.get_logger()  # a level set by anyone (logs.setup) is what they asked for
    if logger.level == logging.NOTSET and not logger.isEnabledFor(logging.INFO):
        tf.logging.warning(  # said once (logs._NoiseFilter)
            "Training logs its loss lines at INFO, which is not shown: no log level was set "
            "(TensorFlow's default is WARNING). Call "
            "tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO) to see them."
        )
    with _model_dir.training(estimator, max_steps, steps) as counter:
        yield [counter, *(hooks or ())]  # first: a hook evaluating in step 1 is not "the step"
    counter.check_ran("input_fn")


def guarded_eval_hooks(config, hooks, steps) -> list:
    """Checks the task; ``hooks`` with an ``EvalGuard`` (unless train_and_evaluate's is there)."""
    check_direct_call(config, "evaluate")
    eval_dir = os.path.join(model_dir := config.model_dir or "", "eval")
    writes_to = eval_dir if os.path.isdir(eval_dir) else model_dir
    if model_dir and os.path.isdir(writes_to) and not os.access(writes_to, os.W_OK):
        tf.logging.warning(  # TensorFlow's C++ error is below TF_CPP_MIN_LOG_LEVEL's default
            f"{writes_to} is not writable: evaluate() returns its metrics but saves none there, "
            "where inspect, early_stopping and best_exporter read them"
        )
    hooks = list(hooks or ())
    if not any(isinstance(hook, EvalGuard) for hook in hooks):
        hooks.append(EvalGuard(steps, "steps", "input_fn"))
    return hooks


def _cardinalities() -> list:
    """The lengths of the Datasets Estimator feeds through an initializable iterator
    (MakeIterator); none under a strategy: its per-device datasets break when run here."""
    ops = tf.get_default_graph().get_operations()
    if any(op.type.startswith("MultiDeviceIterator") for op in ops):
        return []
    iterators = [op for op in ops if op.type == "MakeIterator"]
    return [tf.raw_ops.DatasetCardinality(input_dataset=op.inputs[0]) for op in iterators]


def _lengths(session, cardinalities: list) -> list[int]:
    with contextlib.suppress(tf.errors.OpError):  # placeholders, fed by the input's own hook
        if cardinalities:
            return session.run(cardinalities)
    return [tf.data.experimental.UNKNOWN_CARDINALITY]


class EndlessPredictWarning(tf.train.SessionRunHook):
    """Warns that ``predict`` reads data that repeats forever (its predictions never end)."""

    def begin(self) -> None:
        self._cardinalities = _cardinalities()

    def after_create_session(self, session, coord) -> None:
        if tf.data.experimental.INFINITE_CARDINALITY in _lengths(session, self._cardinalities):
            tf.logging.warning(
                "predict: `input_fn` repeats forever, so its predictions never end: take what "
                "you need (itertools.islice), or do not repeat the data (num_epochs=1)"
            )


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
        self._cardinalities = _cardinalities()

    def after_create_session(self, session, coord) -> None:
        unknown = tf.data.experimental.UNKNOWN_CARDINALITY
        cardinalities = _lengths(session, self._cardinalities)
        self._total, self._said_at, ends_at = self._steps, time.monotonic(), min(cardinalities)
        if ends_at >= 0:  # the data's length, where less than `steps`
            self._total = min(ends_at, self._steps or ends_at)
        up_to = "up to " if self._steps and ends_at == unknown else ""
        tf.logging.info("Evaluating %s%s batches", up_to, self._total or "all")
        if self._steps is None and tf.data.experimental.INFINITE_CARDINALITY in cardinalities:
            raise ValueError(
                f"`{self._input_arg}` repeats forever and `{self._steps_arg}=None` evaluates "
                f"until the data ends: pass `{self._steps_arg}=N` or do not repeat the eval data."
            )
        # Without a Dataset (queues, a one-shot iterator) the length is unknown too.
        if self._steps is None and ends_at < 0:
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
                f"Evaluation: {self._batches} batches so far, and `{self._input_arg}` (of unknown "
                f"length) has not ended yet: pass `{self._steps_arg}=N` to bound it."
            )

    def end(self, session) -> None:
        if self._batches == 0:
            raise ValueError(
                f"`{self._input_arg}` yielded no batch: the evaluation would report zeros. "
                "Check that the eval data is not empty."
            )
