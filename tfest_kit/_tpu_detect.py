"""Finding a TPU without touching the network unless the user names one.

Local TPU devices are listed through ``tf.config``. Only when a TPU name or ``grpc://`` address
is given (argument, ``RunConfig(cluster=…/master=…)`` or the ``TPU_NAME`` environment variable)
is the official ``TPUClusterResolver`` asked, because with no name it queries the GCE metadata
server.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Sequence
from typing import Any, Optional, Union
from urllib.parse import urlparse

from tfest_kit._tf import tf, tf2

__all__ = [
    "TPUClusterResolver",
    "tpu_available",
    "CrossShardOptimizer",
    "NoTPUClusterResolver",
    "mark_tpu_in_use",
    "tpu_in_use",
]

_OfficialResolver = tf2.distribute.cluster_resolver.TPUClusterResolver
_state = {"official_estimator_built": False}


@functools.lru_cache(maxsize=1)
def _local_tpu() -> bool:
    # Physical, not logical, devices: listing logical devices initialises the runtime and
    # would stop the user from calling tf.config.set_visible_devices afterwards.
    return bool(tf2.config.list_physical_devices("TPU"))


def _tpu_name(tpu) -> Optional[str]:
    if isinstance(tpu, (list, tuple)):
        # The official resolver also takes a one-item list (TF1-era scripts pass [FLAGS.tpu]).
        if len(tpu) != 1:
            raise ValueError(
                "`tpu` must be a TPU name, a grpc:// address or a list of exactly one. "
                f"Got: {tpu!r}"
            )
        tpu = tpu[0]
    return tpu or os.environ.get("TPU_NAME") or None


def _grpc_reachable(address: str, timeout: float = 3.0) -> bool:
    parsed = urlparse(address)
    if not parsed.hostname or not parsed.port:
        return False
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout):
            return True
    except OSError:
        return False


class NoTPUClusterResolver(tf2.distribute.cluster_resolver.ClusterResolver):
    """A resolver meaning "no TPU": empty cluster spec, master ``""``.

    ``tfest_kit.tpu.TPUEstimator`` and ``RunConfig(cluster=…)`` treat it as a local CPU/GPU run.

    Args:
      reason: why no TPU was found, kept for messages.

    Example:

        resolver = tpu.TPUClusterResolver()        # no TPU name and no local TPU
        isinstance(resolver, tpu.NoTPUClusterResolver)   # True; resolver.master() == ""
        config = tpu.RunConfig(cluster=resolver)   # TPUEstimator then runs on CPU/GPU
    """

    def __init__(self, reason: str = "no TPU found") -> None:
        self.reason = reason
        self.task_type = None
        self.task_id = None
        self.rpc_layer = None

    def cluster_spec(self):
        return tf.train.ClusterSpec({})

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        del task_type, task_id, rpc_layer
        return ""

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        del task_type, task_id, config_proto
        return {}

    @property
    def environment(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"NoTPUClusterResolver(reason={self.reason!r})"


def _official_resolver(name: str, zone, project, **kw) -> Any:
    """Returns the official resolver for ``name`` or raises with the reason."""
    if name.startswith("grpc://") and not _grpc_reachable(name):
        raise ConnectionError(f"nothing answers at {name}")
    resolver = _OfficialResolver(tpu=name, zone=zone, project=project, **kw)
    if not resolver.master():
        raise ConnectionError(f"the resolver for {name!r} returned no master")
    return resolver


def TPUClusterResolver(  # noqa: N802  (stands in for the official class)
    tpu: Union[None, str, Sequence[str]] = None,
    zone: Optional[str] = None,
    project: Optional[str] = None,
    **kw,
):
    """Returns the official ``TPUClusterResolver`` when a TPU resolves, else a no-TPU resolver.

    Unlike the official class, ``tpu=None`` without ``TPU_NAME`` never contacts the GCE metadata
    server: it looks at local devices only (a TPU VM gets the official resolver for ``"local"``).
    It is a function under the class's name, so ``isinstance(r, TPUClusterResolver)`` does not
    work: test ``r.master()`` (``""`` without a TPU) instead.

    Args:
      tpu: TPU name or ``grpc://host:port`` address (or a list of one, as the official class
        takes); None reads ``TPU_NAME``.
      zone: GCE zone, passed to the official resolver.
      project: GCP project, passed to the official resolver.
      **kw: further arguments for the official resolver.

    Returns:
      A ``tf.distribute.cluster_resolver.TPUClusterResolver`` or a
      :class:`NoTPUClusterResolver` (whose ``master()`` is ``""``).

    Raises:
      ValueError: if ``tpu`` is a list of more or fewer than one name.

    Example:

        resolver = TPUClusterResolver(FLAGS.tpu_name)
        config = RunConfig(cluster=resolver, model_dir=...)
    """
    name = _tpu_name(tpu)
    if name is None:
        if _local_tpu():
            return _OfficialResolver(tpu="local", **kw)
        return NoTPUClusterResolver("no TPU name given and no local TPU device")
    try:
        return _official_resolver(name, zone, project, **kw)
    except Exception as e:  # any failure to resolve means: run without a TPU
        tf.logging.warning("TPU %r did not resolve (%s); running without a TPU.", name, e)
        return NoTPUClusterResolver(f"TPU {name!r} did not resolve: {e}")


def tpu_available(tpu: Union[None, str, Sequence[str]] = None) -> bool:
    """Whether a TPU can be used.

    Args:
      tpu: a TPU name or ``grpc://`` address (or a list of one) to try (then, and with
        ``TPU_NAME`` set, the official resolver is asked; that may use the network). None:
        local devices only.

    Returns:
      True if a TPU is reachable.

    Raises:
      ValueError: if ``tpu`` is a list of more or fewer than one name.

    Example:

        if not tpu_available():
            print("training on CPU/GPU")
    """
    name = _tpu_name(tpu)
    if name is None:
        return _local_tpu()
    try:
        _official_resolver(name, None, None)
    except Exception as e:  # noqa: BLE001  (not resolving is the answer, not an error)
        tf.logging.info("TPU %r is not available: %s", name, e)
        return False
    return True


def mark_tpu_in_use() -> None:
    """Records that an official TPUEstimator was built (CrossShardOptimizer then wraps)."""
    _state["official_estimator_built"] = True


def tpu_in_use() -> bool:
    """Whether TPU-only ops may be built: an official TPUEstimator was built, or a TPU is local.

    Off a TPU, ``CrossShardOptimizer`` and the legacy runner's ``tf.tpu`` stand-ins build what
    one replica would compute instead of ops that have no CPU/GPU kernel.
    """
    return _state["official_estimator_built"] or _local_tpu()


def CrossShardOptimizer(  # noqa: N802  (stands in for the official class)
    opt, reduction: Optional[str] = None, name: str = "CrossShardOptimizer", group_assignment=None
):
    """The official ``tf.compat.v1.tpu.CrossShardOptimizer`` on a TPU, ``opt`` itself otherwise.

    Off a TPU there are no shards to reduce across, and the official wrapper's
    ``cross_replica_sum`` cannot run on CPU, so the optimizer is returned unchanged. It is a
    function under the class's name: ``isinstance(o, CrossShardOptimizer)`` does not work.

    Args:
      opt: a ``tf.compat.v1.train.Optimizer``.
      reduction: a ``tf.compat.v1.losses.Reduction``; None keeps the official default (TPU only).
      name: name of the wrapper (TPU only).
      group_assignment: replica groups (TPU only).

    Returns:
      The wrapped optimizer on a TPU, else ``opt``.

    Raises:
      TypeError: if ``opt`` is not a ``tf.compat.v1.train.Optimizer``.

    Example:

        optimizer = CrossShardOptimizer(tf.compat.v1.train.AdamOptimizer(1e-3))
    """
    if not isinstance(opt, tf.train.Optimizer):
        raise TypeError(f"`opt` must be a tf.compat.v1.train.Optimizer. Got: {opt!r}")
    if tpu_in_use():
        kwargs = {"reduction": reduction} if reduction is not None else {}
        return tf.tpu.CrossShardOptimizer(
            opt, name=name, group_assignment=group_assignment, **kwargs
        )
    return opt
