"""``TF_CONFIG`` clusters: validation, local cluster specs and a local cluster launcher.

An Estimator program runs unchanged on one process or as one task of a cluster; the cluster is
described to each process by the ``TF_CONFIG`` environment variable, a JSON object such as::

    {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"], "ps": ["host2:2222"]},
     "task": {"type": "worker", "index": 0}}

TensorFlow's own checks of that variable happen late (when ``RunConfig`` is built) and some
mistakes surface only as a hang or a gRPC error.  :func:`validate_tf_config` checks it up front
and names the offending part.

``python -m tfest_kit.cluster`` starts a whole cluster on this machine, each task with its own
``TF_CONFIG`` on free loopback ports, and prefixes every output line with the task::

    python -m tfest_kit.cluster --workers 1 --ps 1 --evaluator -- \
        python -m recipes.bert_classifier --output_dir=/tmp/bert_cluster

It exits with the chief's status, stops every task on Ctrl-C or when the chief fails, and shuts
the parameter servers (which otherwise serve forever) down once training is done. TensorFlow's
task servers listen on every network interface, not only loopback, and run what any client
sends them: run a cluster on a trusted network or behind a firewall.

Example:

    from tfest_kit import cluster

    config = cluster.validate_tf_config()          # reads $TF_CONFIG; {} when unset
    spec = cluster.cluster_spec(workers=2, ps=1)   # {"chief": ["127.0.0.1:…"], …}
    env_value = json.dumps(cluster.tf_config(spec, "worker", 1))
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from tfest_kit._checks import check_int
from tfest_kit._tf_config import CLUSTER_TASK_TYPES, TASK_TYPES, validate_tf_config

__all__ = [
    "CLUSTER_TASK_TYPES",
    "TASK_TYPES",
    "cluster_spec",
    "free_ports",
    "main",
    "multi_worker_strategy",
    "tf_config",
    "validate_tf_config",
]


def free_ports(count: int, host: str = "") -> list[int]:
    """Returns ``count`` distinct TCP ports that are free on ``host`` right now.

    All sockets stay open until every port is picked, so the ports differ; another program may
    still take one before the caller binds it.

    Args:
      count: how many ports.
      host: the address to bind; by default every interface, which is where TensorFlow's
        task servers listen whatever address ``TF_CONFIG`` gives them (a port free on
        loopback alone may be taken on another interface).

    Returns:
      A list of port numbers.

    Raises:
      ValueError: if ``count`` is negative.

    Example:

        chief_port, worker_port = free_ports(2)
    """
    count = check_int("count", count, 0)
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def cluster_spec(
    *, chief: int = 1, workers: int = 0, ps: int = 0, host: str = "127.0.0.1"
) -> dict[str, list[str]]:
    """Builds the ``"cluster"`` part of ``TF_CONFIG`` for tasks on this machine.

    Args:
      chief: number of chief tasks; must be 1 (an Estimator cluster has exactly one).
      workers: number of (non-chief) worker tasks.
      ps: number of parameter-server tasks.
      host: the address ``TF_CONFIG`` gives every task (loopback by default). TensorFlow's
        servers listen on every interface whatever it is; the ports are free on all of them.

    Returns:
      ``{"chief": ["127.0.0.1:PORT"], "worker": [...], "ps": [...]}`` with free ports; empty
      jobs are left out.

    Raises:
      ValueError: if ``chief`` is not 1 or a count is negative.

    Example:

        spec = cluster_spec(workers=2, ps=1)
    """
    if chief != 1:
        raise ValueError(
            f"`chief` must be 1: an Estimator cluster has exactly one chief. Got: {chief!r}"
        )
    counts = {
        "chief": 1,
        "worker": check_int("workers", workers, 0),
        "ps": check_int("ps", ps, 0),
    }
    ports = iter(free_ports(sum(counts.values())))
    return {job: [f"{host}:{next(ports)}" for _ in range(n)] for job, n in counts.items() if n}


def tf_config(cluster: Mapping[str, Sequence[str]], task_type: str, index: int = 0) -> dict:
    """Returns the validated ``TF_CONFIG`` dict of one task of ``cluster``.

    Args:
      cluster: the cluster part, e.g. from :func:`cluster_spec`.
      task_type: ``"chief"``, ``"worker"``, ``"ps"`` or ``"evaluator"``.
      index: the task's index within its type.

    Returns:
      ``{"cluster": {...}, "task": {"type": task_type, "index": index}}``.

    Raises:
      ValueError: from :func:`validate_tf_config` if the task does not fit the cluster.

    Example:

        os.environ["TF_CONFIG"] = json.dumps(tf_config(spec, "ps", 0))
    """
    return validate_tf_config(
        {
            "cluster": {k: list(v) for k, v in cluster.items()},
            "task": {"type": task_type, "index": index},
        }
    )


def multi_worker_strategy() -> Any:
    """Returns the ``MultiWorkerMirroredStrategy`` for ``RunConfig(train_distribute=…)``.

    The evaluator gets None: it is not part of the training cluster, and TensorFlow 2.15's
    strategy constructor fails there (``multi_worker_util.worker_count`` looks the evaluator up
    in the cluster: ``KeyError: 'evaluator'``).  The same program can thus build its
    ``RunConfig`` the same way on every task.  The task is read from ``$TF_CONFIG``, which the
    strategy itself reads too.

    Returns:
      ``tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy()`` (the graph-mode
      strategy Estimator needs), or None on an evaluator task.

    Raises:
      ValueError: if ``TF_CONFIG`` is malformed.

    Example:

        config = tf.estimator.RunConfig(model_dir, train_distribute=multi_worker_strategy())
    """
    config = validate_tf_config(workers_only_allowed=True)
    if config.get("task", {}).get("type") == "evaluator":
        return None
    from tfest_kit._tf import tf

    return tf.distribute.experimental.MultiWorkerMirroredStrategy()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m tfest_kit.cluster``; see :mod:`tfest_kit._cluster_launcher`.

    Returns the chief's exit status.

    Example:

        # as: python -m tfest_kit.cluster --workers 2 --ps 1 --evaluator -- python -m ...
        status = main(["--workers", "2", "--ps", "1", "--evaluator", "--",
                       "python", "-m", "recipes.bert_classifier", "--output_dir=/tmp/b"])
    """
    from tfest_kit import _cluster_launcher

    return _cluster_launcher.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
