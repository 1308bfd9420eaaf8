"""``TF_CONFIG`` clusters: validation, the multi-worker strategy and local cluster specs.

:func:`validate_tf_config` catches what TensorFlow lets through into a hang or a gRPC error;
:class:`LocalCluster` (``python -m tfest_kit.cluster``) runs a cluster locally (docs/cluster.md).
"""

import json
import os
import re
import socket
from collections.abc import Mapping, Sequence
from typing import Any, Union

from tfest_kit._checks import check_int

__all__ = ["CLUSTER_TASK_TYPES", "LocalCluster", "cluster_spec"]
__all__ += ["free_ports", "main", "multi_worker_strategy", "tf_config", "validate_tf_config"]

CLUSTER_TASK_TYPES = ("chief", "master", "worker", "ps")  # master: TF1's chief
_TOP_LEVEL_KEYS = (  # what RunConfig and the distribute coordinator read
    "cluster task environment job rpc_layer service session_master eval_session_master model_dir"
).split()
_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):\d{1,5}$", re.ASCII)


def _invalid(field: str, problem: str, value: Any) -> ValueError:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    shown = text if len(text) <= 300 else text[:300] + "…"
    return ValueError(f"{'TF_CONFIG ' + field if field else 'TF_CONFIG'} {problem}. Got: {shown}")


def _parse(tf_config: Union[str, Mapping[str, Any], None]) -> dict:
    if tf_config is None:
        tf_config = os.environ.get("TF_CONFIG", "{}")
        if not tf_config.strip():  # RunConfig() raised a bare JSONDecodeError
            raise _invalid("", "is set but empty: unset it to run one process", tf_config)
    if isinstance(tf_config, str):
        if not tf_config.strip():
            return {}
        try:
            parsed = json.loads(tf_config)
        except json.JSONDecodeError as e:
            raise _invalid("", f"is not valid JSON ({e})", tf_config) from e
    elif isinstance(tf_config, Mapping):
        parsed = tf_config
    else:
        raise TypeError(
            "`tf_config` must be a JSON string, a dict or None (read $TF_CONFIG). "
            f"Got: {type(tf_config).__name__} {tf_config!r}"
        )
    if not isinstance(parsed, Mapping):
        raise _invalid("", "must be a JSON object with keys 'cluster' and 'task'", parsed)
    return json.loads(json.dumps(dict(parsed)))  # a deep, JSON-only copy we may normalise


def _check_cluster(cluster: Any, workers_only_allowed: bool) -> dict:
    if not isinstance(cluster, Mapping):
        raise _invalid("'cluster'", "must be an object of task types to address lists", cluster)
    addresses = []
    for task_type, listed in cluster.items():
        if task_type not in CLUSTER_TASK_TYPES:
            problem = f"has task type {task_type!r}; expected some of {list(CLUSTER_TASK_TYPES)}"
            raise _invalid("'cluster'", problem + " (an evaluator is only a 'task')", cluster)
        if isinstance(listed, str) or not isinstance(listed, Sequence):
            raise _invalid(f"cluster.{task_type}", 'must be a list of "host:port" strings', listed)
        for index, address in enumerate(listed):
            if not isinstance(address, str) or not _ADDRESS.match(address):
                raise _invalid(f"cluster.{task_type}", 'must hold "host:port" strings', address)
            if not 0 < int(address.rsplit(":", 1)[1]) < 65536:
                raise _invalid(f"cluster.{task_type}[{index}]", "port not in 1-65535", address)
        addresses += listed
    if len(set(addresses)) < len(addresses):
        raise _invalid("'cluster'", "gives one address to two tasks", cluster)
    chief_type = "master" if "master" in cluster else "chief"
    # MultiWorkerMirroredStrategy makes worker 0 the chief of a cluster of workers only.
    workers_only = workers_only_allowed and set(cluster) == {"worker"}
    if cluster and len(cluster.get(chief_type, [])) != 1 and not workers_only:
        problem = (
            f"must have exactly one {chief_type!r} task (a cluster of workers only needs "
            "RunConfig(train_distribute=tf.distribute.experimental.MultiWorkerMirroredStrategy()))"
        )
        raise _invalid("'cluster'", problem, cluster)
    return dict(cluster)


def _check_task(task: Any, cluster: Mapping) -> dict:
    if not isinstance(task, Mapping):
        raise _invalid("'task'", 'must be an object like {"type": "worker", "index": 0}', task)
    task_type, index = task.get("type"), task.get("index")
    if not cluster:  # RunConfig's local mode: one process, which must be worker 0
        if task_type not in (None, "worker") or index not in (None, 0, "0"):
            raise _invalid("'task'", "may only be worker 0 without a 'cluster'", task)
        return dict(task)
    if isinstance(index, str) and index.strip().isdigit():
        index = int(index)  # as RunConfig accepts "0"
    if task_type not in [*cluster, "evaluator"]:
        raise _invalid("task.type", f"must be one of {[*cluster, 'evaluator']}", task_type)
    count = len(cluster[task_type]) if task_type != "evaluator" else 1
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        problem = f"must be an index into cluster.{task_type}, which has {count} task(s)"
        raise _invalid("task.index", problem, index)
    return {**task, "index": index}


def validate_tf_config(
    tf_config: Union[str, Mapping[str, Any], None] = None, *, workers_only_allowed: bool = False
) -> dict:
    """Parses and checks a ``TF_CONFIG`` before TensorFlow acts on it.

    Checks JSON, known keys and task types, one chief, ``"host:port"`` addresses (port 1-65535)
    used once, and a task in the cluster: what ``RunConfig`` lets through into a hang.

    Args:
      tf_config: JSON text, a dict, or None to read the ``TF_CONFIG`` environment variable.
      workers_only_allowed: accept workers without a chief, as MultiWorkerMirroredStrategy does.

    Returns:
      A new dict (task index an int); ``{}`` when ``TF_CONFIG`` is unset (or ``""`` given).

    Raises:
      ValueError: naming the offending part, e.g. ``TF_CONFIG task.index 3 is out of range``.
      TypeError: if ``tf_config`` is not a string, dict or None.

    Example:

        config = validate_tf_config()     # config["task"] == {"type": "worker", "index": 0}
    """
    config = _parse(tf_config)
    if unknown := [key for key in config if key not in _TOP_LEVEL_KEYS]:
        raise _invalid("", f"has unknown top-level keys {unknown}", config)
    cluster = _check_cluster(config.get("cluster", {}), workers_only_allowed)
    if "task" in config:
        config["task"] = _check_task(config["task"], cluster)
    elif cluster:
        problem = "has a 'cluster' but no 'task' saying which task this process is"
        raise _invalid("", problem, config)
    return config


def free_ports(count: int) -> list[int]:
    """Returns ``count`` distinct TCP ports free on every interface now.

    Example:

        chief_port, worker_port = free_ports(2)
    """
    sockets = []
    try:
        for _ in range(check_int("count", count, 0)):
            sockets.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sockets[-1].bind(("", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def cluster_spec(*, workers: int = 0, ps: int = 0, host: str = "127.0.0.1") -> dict[str, list[str]]:
    """The ``"cluster"`` part of ``TF_CONFIG``: a chief, ``workers`` and ``ps`` tasks, each at
    ``host`` on a port free on this machine; empty jobs are left out.

    Example:

        spec = cluster_spec(workers=2, ps=1)  # {"chief": ["127.0.0.1:…"], "worker": […], …}
    """
    counts = {"chief": 1, "worker": check_int("workers", workers, 0), "ps": check_int("ps", ps, 0)}
    ports = iter(free_ports(sum(counts.values())))
    return {job: [f"{host}:{next(ports)}" for _ in range(n)] for job, n in counts.items() if n}


def tf_config(cluster: Mapping[str, Sequence[str]], task_type: str, index: int = 0) -> dict:
    """Returns the validated ``TF_CONFIG`` dict of one task of ``cluster``.

    Example:

        os.environ["TF_CONFIG"] = json.dumps(tf_config(spec, "ps", 0))
    """
    task = {"type": task_type, "index": index}
    return validate_tf_config({"cluster": {k: list(v) for k, v in cluster.items()}, "task": task})


def multi_worker_strategy() -> Any:
    """Returns the graph-mode ``MultiWorkerMirroredStrategy`` for ``RunConfig(train_distribute=…)``.

    The evaluator gets None: TensorFlow 2.15's strategy fails there (``KeyError: 'evaluator'``),
    so every task can build its ``RunConfig`` the same way.

    Example:

        config = tf.estimator.RunConfig(model_dir, train_distribute=multi_worker_strategy())
    """
    if validate_tf_config(workers_only_allowed=True).get("task", {}).get("type") == "evaluator":
        return None
    from tfest_kit._tf import tf

    return tf.distribute.experimental.MultiWorkerMirroredStrategy()


def __getattr__(name: str) -> Any:
    if name in ("LocalCluster", "main"):  # imported on first use: the launcher imports us
        from tfest_kit.cluster import launcher

        return getattr(launcher, name)
    raise AttributeError(f"module 'tfest_kit.cluster' has no attribute {name!r}")
