"""``TF_CONFIG`` clusters: validation, the multi-worker strategy and local cluster specs.

An Estimator program runs unchanged on one process or as one task of a cluster; the cluster is
described to each process by the ``TF_CONFIG`` environment variable, a JSON object such as::

    {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"], "ps": ["host2:2222"]},
     "task": {"type": "worker", "index": 0}}

TensorFlow checks that variable late (when ``RunConfig`` is built) and some mistakes surface
only as a hang or a gRPC error: :func:`validate_tf_config` checks it up front and names the
offending part. ``tf.distribute.cluster_resolver.TFConfigClusterResolver`` reads the same
variable and checks none of it.

:class:`LocalCluster` and ``python -m tfest_kit.cluster`` (in :mod:`tfest_kit.cluster.launcher`)
run a whole cluster on this machine, each task with its own ``TF_CONFIG``; see docs/cluster.md.

Example:

    from tfest_kit import cluster

    config = cluster.validate_tf_config()          # reads $TF_CONFIG; {} when unset
    spec = cluster.cluster_spec(workers=2, ps=1)   # {"chief": ["127.0.0.1:…"], …}
    env_value = json.dumps(cluster.tf_config(spec, "worker", 1))
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

from tfest_kit._checks import check_int, did_you_mean, is_int_at_least

if TYPE_CHECKING:
    from tfest_kit.cluster.launcher import LocalCluster, main

__all__ = [
    "CLUSTER_TASK_TYPES",
    "TASK_TYPES",
    "LocalCluster",
    "check_tf_config_json",
    "cluster_spec",
    "free_ports",
    "is_chief_task",
    "main",
    "multi_worker_strategy",
    "tf_config",
    "validate_tf_config",
]

# Jobs that may appear in "cluster" (``master`` is TF1's name for the chief).
CLUSTER_TASK_TYPES = ("chief", "master", "worker", "ps")
# Task types a process may have; the evaluator runs beside the training cluster, not in it.
TASK_TYPES = (*CLUSTER_TASK_TYPES, "evaluator")
# Keys RunConfig and the distribute coordinator read from TF_CONFIG.
_TOP_LEVEL_KEYS = (
    "cluster",
    "task",
    "environment",
    "rpc_layer",
    "service",
    "session_master",
    "eval_session_master",
    "model_dir",
)
_ADDRESS = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):(?P<port>[^:]*)$")
_MAX_SHOWN = 300


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "…"


def _parse(tf_config: Union[str, Mapping[str, Any], None]) -> dict:
    if tf_config is None:
        tf_config = os.environ.get("TF_CONFIG", "")
    if isinstance(tf_config, (bytes, bytearray)):
        tf_config = tf_config.decode("utf-8")
    if isinstance(tf_config, str):
        if not tf_config.strip():
            return {}
        try:
            parsed = json.loads(tf_config)
        except json.JSONDecodeError as e:
            start = max(0, e.pos - 20)
            raise ValueError(
                f"TF_CONFIG is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}, "
                f"near {tf_config[start : e.pos + 20]!r}. Expected a JSON object such as "
                '{"cluster": {"chief": ["host:2222"]}, "task": {"type": "chief", "index": 0}}; '
                "fix the TF_CONFIG environment variable, or unset it for one process. "
                f"Got: {_shown(tf_config)}"
            ) from e
    elif isinstance(tf_config, Mapping):
        parsed = tf_config
    else:
        raise TypeError(
            "`tf_config` must be a JSON string, a dict or None (read $TF_CONFIG). "
            f"Got: {type(tf_config).__name__} {tf_config!r}"
        )
    if not isinstance(parsed, Mapping):
        raise ValueError(
            f"TF_CONFIG must be a JSON object with keys 'cluster' and 'task'. Got: {_shown(parsed)}"
        )
    return json.loads(json.dumps(dict(parsed)))  # a deep, JSON-only copy we may normalise


def _check_address(where: str, address: Any) -> str:
    if not isinstance(address, str):
        raise ValueError(f'TF_CONFIG {where} must be a "host:port" string. Got: {_shown(address)}')
    match = _ADDRESS.match(address)
    port = match.group("port") if match else ""
    # isascii: str.isdigit() also takes "²", which int() then refuses.
    if not match or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise ValueError(
            f'TF_CONFIG {where} must be "host:port" with an integer port in 1-65535 '
            f'(e.g. "10.0.0.2:2222"). Got: {address!r}'
        )
    return address


def _check_cluster(cluster: Any, workers_only_allowed: bool) -> dict:
    if not isinstance(cluster, Mapping):
        raise ValueError(
            "TF_CONFIG 'cluster' must be an object mapping task types to lists of "
            f'"host:port" addresses. Got: {_shown(cluster)}'
        )
    seen: dict[str, str] = {}
    for task_type, addresses in cluster.items():
        if task_type == "evaluator":
            raise ValueError(
                "TF_CONFIG 'cluster' must not list 'evaluator': the evaluator is not part of the "
                'training cluster; give it only as "task": {"type": "evaluator", "index": 0}. '
                f"Got: cluster = {_shown(cluster)}"
            )
        if task_type not in CLUSTER_TASK_TYPES:
            raise ValueError(
                f"TF_CONFIG 'cluster' has an unknown task type {task_type!r}; expected some of "
                f"{list(CLUSTER_TASK_TYPES)}.{did_you_mean(task_type, CLUSTER_TASK_TYPES)} "
                f"Got: cluster = {_shown(cluster)}"
            )
        if isinstance(addresses, str) or not isinstance(addresses, Sequence):
            raise ValueError(
                f'TF_CONFIG cluster.{task_type} must be a list of "host:port" strings. '
                f"Got: {_shown(addresses)}"
            )
        for i, address in enumerate(addresses):
            where = f"cluster.{task_type}[{i}]"
            _check_address(where, address)
            if address in seen:
                raise ValueError(
                    f"TF_CONFIG gives the address {address!r} to both {seen[address]} and "
                    f"{where}; every task needs its own host:port."
                )
            seen[address] = where
    if not cluster:
        return {}
    chief_type = "master" if "master" in cluster else "chief"
    if "master" in cluster and "chief" in cluster:
        raise ValueError(
            "TF_CONFIG 'cluster' has both 'chief' and 'master' (TF1's name for the chief); "
            f"keep only 'chief'. Got: cluster = {_shown(cluster)}"
        )
    chiefs = len(cluster.get(chief_type, []))
    # MultiWorkerMirroredStrategy makes worker 0 the chief of a cluster of workers only.
    workers_only = chiefs == 0 and set(cluster) == {"worker"}
    if chiefs != 1 and not (workers_only and workers_only_allowed):
        raise ValueError(
            f"TF_CONFIG 'cluster' must have exactly one {chief_type!r} task: the chief trains, "
            "writes checkpoints and summaries (a cluster of workers only needs "
            "RunConfig(train_distribute=tf.distribute.experimental."
            f"MultiWorkerMirroredStrategy())). Got: cluster = {_shown(cluster)}"
        )
    return dict(cluster)


def _check_index(task: Mapping) -> int:
    index = task.get("index")
    if isinstance(index, str) and index.strip().isdigit():
        index = int(index)  # RunConfig itself accepts "0"
    if not is_int_at_least(index, 0):
        raise ValueError(
            "TF_CONFIG task.index must be a non-negative integer. "
            f"Got: task = {_shown(dict(task))}"
        )
    return int(index)


def _check_task(task: Any, cluster: Mapping) -> dict:
    if not isinstance(task, Mapping):
        raise ValueError(
            'TF_CONFIG \'task\' must be an object like {"type": "worker", "index": 0}. '
            f"Got: {_shown(task)}"
        )
    unknown = sorted(set(task) - {"type", "index", "trial"})
    if unknown:
        raise ValueError(
            f"TF_CONFIG 'task' has unknown keys {unknown}; expected 'type' and 'index'. "
            f"Got: task = {_shown(dict(task))}"
        )
    task_type = task.get("type")
    if not cluster:
        # RunConfig's local mode: one process, which must be worker 0.
        if task_type not in (None, "worker") or task.get("index", 0) not in (0, "0"):
            raise ValueError(
                "TF_CONFIG has no 'cluster', so 'task' may only be worker 0 (one process). "
                f"Add the cluster or drop 'task'. Got: task = {_shown(dict(task))}"
            )
        return dict(task)
    if task_type is None or "index" not in task:
        raise ValueError(
            "TF_CONFIG has a 'cluster', so 'task' needs both 'type' and 'index'. "
            f"Got: task = {_shown(dict(task))}"
        )
    index = _check_index(task)
    allowed = [*cluster, "evaluator"]
    if task_type not in allowed:
        known = task_type in TASK_TYPES
        reason = "is not in the cluster" if known else "is not a task type"
        raise ValueError(
            f"TF_CONFIG task.type {task_type!r} {reason}; expected one of {allowed}."
            f"{'' if known else did_you_mean(task_type, TASK_TYPES)} "
            f"Got: task = {_shown(dict(task))}, cluster = {_shown(dict(cluster))}"
        )
    if task_type == "evaluator" and "master" in cluster:
        raise ValueError(
            "TF_CONFIG: an 'evaluator' task is not supported with the legacy 'master' job; "
            "rename 'master' to 'chief' in the cluster."
        )
    if task_type != "evaluator" and not cluster[task_type]:
        raise ValueError(
            f"TF_CONFIG cluster.{task_type} lists no address, so there is no task "
            f'{task_type}:{index}: give cluster.{task_type} this task\'s "host:port". '
            f"Got: task = {_shown(dict(task))}, cluster = {_shown(dict(cluster))}"
        )
    if task_type != "evaluator" and index >= len(cluster[task_type]):
        raise ValueError(
            f"TF_CONFIG task.index {index} is out of range: cluster.{task_type} has "
            f"{len(cluster[task_type])} task(s), so the index must be in "
            f"0..{len(cluster[task_type]) - 1}. Got: task = {_shown(dict(task))}"
        )
    return {**task, "index": index}


def check_tf_config_json() -> None:
    """Raises a ``ValueError`` naming ``TF_CONFIG`` when the variable is not a JSON object.

    ``RunConfig()`` parses the variable with ``json.loads`` and lets a bare
    ``JSONDecodeError`` ("Expecting value: line 1 column 1") through, which never says where
    the text came from. Only the JSON is checked here, as RunConfig reads it; the cluster is
    :func:`validate_tf_config`'s.

    Raises:
      ValueError: with the JSON error, its position and the text, e.g. ``TF_CONFIG is not
        valid JSON: Expecting ',' delimiter at line 1 column 9…``.

    Example:

        check_tf_config_json()
        config = tf.estimator.RunConfig()
    """
    _parse(None)


def validate_tf_config(
    tf_config: Union[str, Mapping[str, Any], None] = None, *, workers_only_allowed: bool = False
) -> dict:
    """Parses and checks a ``TF_CONFIG`` before TensorFlow acts on it.

    Checks what ``tf.estimator.RunConfig`` needs and what it lets through into a hang: JSON,
    known keys and task types (``master``: TF1's chief; ``evaluator`` only as a task), one
    chief (or workers only, if allowed), ``"host:port"`` addresses used once, and a task
    that is in the cluster.

    Args:
      tf_config: the JSON text, an already parsed dict, or None to read the ``TF_CONFIG``
        environment variable.
      workers_only_allowed: accept a cluster of workers only, without a chief, as
        ``RunConfig(train_distribute=MultiWorkerMirroredStrategy())`` runs it (worker 0 acts
        as the chief); without a strategy Estimator needs a chief.

    Returns:
      The parsed config as a new dict (task index normalised to an int); ``{}`` when
      ``TF_CONFIG`` is unset or empty (a single-process run).

    Raises:
      ValueError: naming the offending part, e.g. ``TF_CONFIG task.index 3 is out of range:
        cluster.worker has 2 task(s)…``.
      TypeError: if ``tf_config`` is not a string, dict or None.

    Example:

        os.environ["TF_CONFIG"] = json.dumps({
            "cluster": {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222"]},
            "task": {"type": "worker", "index": 0}})
        config = validate_tf_config()     # config["task"] == {"type": "worker", "index": 0}
    """
    config = _parse(tf_config)
    unknown = [key for key in config if key not in _TOP_LEVEL_KEYS]
    if unknown:
        hints = "".join(did_you_mean(key, _TOP_LEVEL_KEYS) for key in unknown)
        raise ValueError(
            f"TF_CONFIG has unknown top-level keys {unknown}; expected some of "
            f"{list(_TOP_LEVEL_KEYS)}.{hints} Got: {_shown(config)}"
        )
    cluster = _check_cluster(config.get("cluster", {}), workers_only_allowed)
    if "task" in config:
        config["task"] = _check_task(config["task"], cluster)
    elif cluster:
        raise ValueError(
            "TF_CONFIG has a 'cluster' but no 'task': each process must say which task it is, "
            f'e.g. "task": {{"type": "worker", "index": 0}}. Got: {_shown(config)}'
        )
    return config


def is_chief_task(where: str) -> bool:
    """Whether ``TF_CONFIG`` makes this process the chief (True without a cluster).

    For hooks that run outside an Estimator (a ``MonitoredTrainingSession`` loop), where no
    ``RunConfig`` says it. A TF1 cluster of ps and workers has no chief task: its loop makes
    worker 0 the chief itself (``is_chief=task_index == 0``), and so must the caller here.

    Args:
      where: the caller, for the error message (``"early_stopping"``).

    Raises:
      ValueError: for an invalid ``TF_CONFIG`` (see :func:`validate_tf_config`), or a cluster
        without a ``chief`` task, naming the ``is_chief`` argument as the fix.

    Example:

        is_chief = is_chief_task("early_stopping") if is_chief is None else is_chief
    """
    cluster = _parse(None).get("cluster") or {}
    if isinstance(cluster, Mapping) and cluster and not {"chief", "master"} & set(cluster):
        raise ValueError(
            f"{where}: TF_CONFIG's cluster has no 'chief' task, so it does not say which task "
            "is the chief. Pass is_chief=… (True on one task, e.g. worker 0, False on the "
            "others: the is_chief you give MonitoredTrainingSession). Got: cluster = "
            f"{_shown(cluster)}"
        )
    config = validate_tf_config()
    task_type = config.get("task", {}).get("type")
    return not config.get("cluster") or task_type in ("chief", "master")


def free_ports(count: int, host: str = "") -> list[int]:
    """Returns ``count`` distinct TCP ports that are free on ``host`` right now.

    Another program may still take one before the caller binds it.

    Args:
      count: how many ports (ValueError if negative).
      host: the address to bind; by default every interface, where TensorFlow's task servers
        listen whatever address ``TF_CONFIG`` gives them.

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
      workers: number of (non-chief) worker tasks (ValueError if negative).
      ps: number of parameter-server tasks (ValueError if negative).
      host: the address ``TF_CONFIG`` gives every task; the ports are free on all interfaces.

    Returns:
      ``{"chief": ["127.0.0.1:PORT"], "worker": [...], "ps": [...]}``, empty jobs left out.

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
    strategy fails there (``KeyError: 'evaluator'``), so every task can build its
    ``RunConfig`` the same way.

    Returns:
      ``tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy()`` (the graph-mode
      strategy Estimator needs), or None on an evaluator task.

    Raises:
      ValueError: if ``$TF_CONFIG`` is malformed.

    Example:

        config = tf.estimator.RunConfig(model_dir, train_distribute=multi_worker_strategy())
    """
    config = validate_tf_config(workers_only_allowed=True)
    if config.get("task", {}).get("type") == "evaluator":
        return None
    from tfest_kit._tf import tf

    return tf.distribute.experimental.MultiWorkerMirroredStrategy()


def __getattr__(name: str) -> Any:
    # The launcher imports this module, so it is imported on first use, not above.
    if name in ("LocalCluster", "main"):
        from tfest_kit.cluster import launcher

        return getattr(launcher, name)
    raise AttributeError(f"module 'tfest_kit.cluster' has no attribute {name!r}")
