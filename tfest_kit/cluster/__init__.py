"""``TF_CONFIG`` clusters: validation, the multi-worker strategy and local cluster specs.

TensorFlow reads ``TF_CONFIG`` late and lets many mistakes through into a hang or a gRPC
error; :func:`validate_tf_config` checks it up front and names the offending part.
:class:`LocalCluster` and ``python -m tfest_kit.cluster`` (``launcher.py``) run a whole
cluster on this machine; see docs/cluster.md.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Mapping, Sequence
from typing import Any, Union

from tfest_kit._checks import check_int, did_you_mean, is_int_at_least

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

CLUSTER_TASK_TYPES = ("chief", "master", "worker", "ps")  # master: TF1's chief
TASK_TYPES = (*CLUSTER_TASK_TYPES, "evaluator")  # the evaluator runs beside the cluster
# What RunConfig and the distribute coordinator read.
_TOP_LEVEL_KEYS = (
    "cluster task environment rpc_layer service session_master eval_session_master model_dir"
).split()
_ADDRESS = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):(?P<port>[^:]*)$")


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= 300 else text[:300] + "…"


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
            raise ValueError(
                f"TF_CONFIG is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}, "
                f"near {tf_config[max(0, e.pos - 20) : e.pos + 20]!r}. Expected an object like "
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


def _check_address(where: str, address: Any) -> None:
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


def _check_cluster(cluster: Any, workers_only_allowed: bool) -> dict:
    if not isinstance(cluster, Mapping):
        raise ValueError(
            "TF_CONFIG 'cluster' must be an object mapping task types to lists of "
            f'"host:port" addresses. Got: {_shown(cluster)}'
        )
    got = f"Got: cluster = {_shown(cluster)}"
    seen: dict[str, str] = {}
    for task_type, addresses in cluster.items():
        if task_type == "evaluator":
            raise ValueError(
                "TF_CONFIG 'cluster' must not list 'evaluator': it is not part of the training "
                f'cluster; give it only as "task": {{"type": "evaluator", "index": 0}}. {got}'
            )
        if task_type not in CLUSTER_TASK_TYPES:
            raise ValueError(
                f"TF_CONFIG 'cluster' has an unknown task type {task_type!r}; expected some of "
                f"{list(CLUSTER_TASK_TYPES)}.{did_you_mean(task_type, CLUSTER_TASK_TYPES)} {got}"
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
    if "master" in cluster and "chief" in cluster:
        raise ValueError(
            "TF_CONFIG 'cluster' has both 'chief' and 'master' (TF1's name for the chief); "
            f"keep only 'chief'. {got}"
        )
    chief_type = "master" if "master" in cluster else "chief"
    chiefs = len(cluster.get(chief_type, []))
    # MultiWorkerMirroredStrategy makes worker 0 the chief of a cluster of workers only.
    workers_only = chiefs == 0 and set(cluster) == {"worker"}
    if chiefs != 1 and not (workers_only and workers_only_allowed):
        raise ValueError(
            f"TF_CONFIG 'cluster' must have exactly one {chief_type!r} task: the chief trains, "
            "writes checkpoints and summaries (a cluster of workers only needs "
            "RunConfig(train_distribute=tf.distribute.experimental."
            f"MultiWorkerMirroredStrategy())). {got}"
        )
    return dict(cluster)


def _check_task(task: Any, cluster: Mapping) -> dict:
    if not isinstance(task, Mapping):
        raise ValueError(
            'TF_CONFIG \'task\' must be an object like {"type": "worker", "index": 0}. '
            f"Got: {_shown(task)}"
        )
    got = f"Got: task = {_shown(dict(task))}"
    unknown = sorted(set(task) - {"type", "index", "trial"})
    if unknown:
        raise ValueError(
            f"TF_CONFIG 'task' has unknown keys {unknown}; expected 'type' and 'index'. {got}"
        )
    task_type, index = task.get("type"), task.get("index")
    if not cluster:  # RunConfig's local mode: one process, which must be worker 0
        if task_type not in (None, "worker") or index not in (None, 0, "0"):
            raise ValueError(
                "TF_CONFIG has no 'cluster', so 'task' may only be worker 0 (one process). "
                f"Add the cluster or drop 'task'. {got}"
            )
        return dict(task)
    if task_type is None or index is None:
        raise ValueError(
            f"TF_CONFIG has a 'cluster', so 'task' needs both 'type' and 'index'. {got}"
        )
    if isinstance(index, str) and index.strip().isdigit():
        index = int(index)  # as RunConfig accepts "0"
    if not is_int_at_least(index, 0):
        raise ValueError(f"TF_CONFIG task.index must be a non-negative integer. {got}")
    allowed = [*cluster, "evaluator"]
    if task_type not in allowed:
        known = task_type in TASK_TYPES
        raise ValueError(
            f"TF_CONFIG task.type {task_type!r} "
            f"{'is not in the cluster' if known else 'is not a task type'}; expected one of "
            f"{allowed}.{'' if known else did_you_mean(task_type, TASK_TYPES)} {got}, "
            f"cluster = {_shown(dict(cluster))}"
        )
    if task_type == "evaluator" and "master" in cluster:
        raise ValueError(
            "TF_CONFIG: an 'evaluator' task is not supported with the legacy 'master' job; "
            "rename 'master' to 'chief' in the cluster."
        )
    count = len(cluster.get(task_type, []))
    if task_type != "evaluator" and not count:
        raise ValueError(
            f"TF_CONFIG cluster.{task_type} lists no address, so there is no task "
            f'{task_type}:{index}: give cluster.{task_type} this task\'s "host:port". {got}'
        )
    if task_type != "evaluator" and index >= count:
        raise ValueError(
            f"TF_CONFIG task.index {index} is out of range: cluster.{task_type} has {count} "
            f"task(s), so the index must be in 0..{count - 1}. {got}"
        )
    return {**task, "index": int(index)}


def check_tf_config_json() -> None:
    """Raises a ``ValueError`` naming ``TF_CONFIG`` when the variable is not a JSON object.

    ``RunConfig()`` lets a bare ``JSONDecodeError`` through, which never names the variable.
    Only the JSON is checked, as RunConfig reads it; the cluster is :func:`validate_tf_config`'s.

    Example:

        check_tf_config_json()
        config = tf.estimator.RunConfig()
    """
    _parse(None)


def validate_tf_config(
    tf_config: Union[str, Mapping[str, Any], None] = None, *, workers_only_allowed: bool = False
) -> dict:
    """Parses and checks a ``TF_CONFIG`` before TensorFlow acts on it.

    Checks JSON, known keys and task types, one chief, ``"host:port"`` addresses used once,
    and a task that is in the cluster: what ``RunConfig`` lets through into a hang.

    Args:
      tf_config: JSON text, a dict, or None to read the ``TF_CONFIG`` environment variable.
      workers_only_allowed: accept workers without a chief, as MultiWorkerMirroredStrategy does.

    Returns:
      A new dict (task index an int); ``{}`` when ``TF_CONFIG`` is unset or empty.

    Raises:
      ValueError: naming the offending part, e.g. ``TF_CONFIG task.index 3 is out of range``.
      TypeError: if ``tf_config`` is not a string, dict or None.

    Example:

        config = validate_tf_config()     # config["task"] == {"type": "worker", "index": 0}
    """
    config = _parse(tf_config)
    unknown = [key for key in config if key not in _TOP_LEVEL_KEYS]
    if unknown:
        hints = "".join(did_you_mean(key, _TOP_LEVEL_KEYS) for key in unknown)
        raise ValueError(
            f"TF_CONFIG has unknown top-level keys {unknown}; expected some of "
            f"{_TOP_LEVEL_KEYS}.{hints} Got: {_shown(config)}"
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

    For hooks outside an Estimator, where no ``RunConfig`` says it. ``where`` (the caller)
    starts the ValueError for a cluster without a chief, where the caller must pass is_chief.

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
    return not config.get("cluster") or config["task"]["type"] in ("chief", "master")


def free_ports(count: int, host: str = "") -> list[int]:
    """Returns ``count`` distinct TCP ports free on ``host`` (default: every interface) now.

    Example:

        chief_port, worker_port = free_ports(2)
    """
    sockets = []
    try:
        for _ in range(check_int("count", count, 0)):
            sockets.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sockets[-1].bind((host, 0))
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
    config = validate_tf_config(workers_only_allowed=True)
    if config.get("task", {}).get("type") == "evaluator":
        return None
    from tfest_kit._tf import tf

    return tf.distribute.experimental.MultiWorkerMirroredStrategy()


def __getattr__(name: str) -> Any:
    if name in ("LocalCluster", "main"):  # imported on first use: the launcher imports us
        from tfest_kit.cluster import launcher

        return getattr(launcher, name)
    raise AttributeError(f"module 'tfest_kit.cluster' has no attribute {name!r}")
