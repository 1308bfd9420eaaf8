"""``Estimator.train`` / ``evaluate`` called directly on a ``TF_CONFIG`` cluster task: one error.

Under a ``TF_CONFIG`` that names a cluster, each task has its part, which
``tfest_kit.train_and_evaluate`` (or ``tf.estimator.train_and_evaluate``) runs: chief and workers
train after starting the task's server, the evaluator evaluates, a ps task serves variables.
A program that calls ``train`` itself got, on a ps or evaluator task, TensorFlow's "Train has
been called wrong configuration … Current configuration: <…RunConfig object at 0x…>", and on
the chief or a worker no error at all: its session waits forever for the task's server, which
nothing started. :func:`check_direct_call` names the task and the fix instead; tfest_kit's
Estimators (``tpu.TPUEstimator`` off a TPU, ``keras_bridge.to_estimator``'s) call it first in
``train`` and ``evaluate``. The calls ``train_and_evaluate`` makes itself pass: it calls
``train`` on the chief and the workers once their server runs, and ``evaluate`` on the evaluator
(and tfest_kit's recipes on the chief).
"""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

__all__ = ["check_direct_call"]

# Seconds to wait for the task's own server to accept a connection.
_CONNECT_SECS = 2.0


def _listening(master: str) -> bool:
    """Whether something accepts TCP connections at ``grpc://host:port``."""
    try:
        parts = urlsplit(master)
        host, port = parts.hostname, parts.port
    except ValueError:
        return True  # not an address this check understands: leave it to TensorFlow
    if not host or not port:
        return True
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_SECS):
            return True
    except OSError:
        return False


def _fix(task: str, method: str) -> str:
    return (
        f"Estimator.{method} was called directly on task {task} of the TF_CONFIG cluster. "
        "Train through tfest_kit.train_and_evaluate(estimator, train_input_fn, eval_input_fn, "
        "max_steps=…), the same program on every task: it runs each task's part (chief and "
        "workers train, the evaluator evaluates, ps tasks serve variables)"
    )


def check_direct_call(config: Any, method: str) -> None:
    """Refuses ``train`` / ``evaluate`` on a cluster task that cannot run it by itself.

    Refused: ``train`` on a ``ps`` or ``evaluator`` task (TensorFlow refuses it too, with the
    ``RunConfig``'s repr); ``evaluate`` on a ``ps`` task; ``train`` on the chief or a worker of
    a cluster of more than one task when no server listens at the task's address (its session
    would wait for one forever). Nothing is checked without a cluster, or with a
    ``train_distribute`` strategy (which starts its own servers).

    Args:
      config: the Estimator's ``RunConfig``.
      method: ``"train"`` or ``"evaluate"``.

    Raises:
      ValueError: naming the task (type and index) and saying to train through
        ``tfest_kit.train_and_evaluate``.
    """
    task_type = config.task_type
    task = f"{task_type}:{config.task_id}"
    jobs = config.cluster_spec.jobs if config.cluster_spec else []
    if not jobs and task_type != "evaluator":
        return  # one process
    if task_type == "ps" or (method == "train" and task_type == "evaluator"):
        raise ValueError(f"{_fix(task, method)}. Got: task type {task_type!r}")
    if method != "train" or config.train_distribute is not None or not config.master:
        return
    tasks = sum(len(config.cluster_spec.job_tasks(job)) for job in jobs)
    if tasks > 1 and not _listening(config.master):
        raise ValueError(
            f"{_fix(task, method)}; it starts the task's server, which nothing started here "
            f"(the session would wait for it forever). Got: no server at {config.master}"
        )
