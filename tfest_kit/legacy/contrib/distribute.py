"""``tf.contrib.distribute`` as TF 1.15 had it, over ``tf.compat.v1.distribute``.

The strategies moved to ``tf.compat.v1.distribute`` (``MirroredStrategy``,
``OneDeviceStrategy``, ``experimental.MultiWorkerMirroredStrategy`` for contrib's
``CollectiveAllReduceStrategy``, ``experimental.ParameterServerStrategy``).  ``MirroredStrategy``
takes TF 1.15's contrib arguments (``num_gpus``, ``num_gpus_per_worker``, ``cross_tower_ops``,
``auto_shard_dataset``): ``num_gpus=N`` mirrors on the first N GPUs, ``num_gpus=0`` on the CPU,
as it did.  Everything else ``tf.compat.v1.distribute`` has (``ReduceOp``,
``get_replica_context`` …) is served from there.

Example:

    config = tf.estimator.RunConfig(
        train_distribute=tf.contrib.distribute.MirroredStrategy(num_gpus=2))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from tfest_kit._tf import tf

__all__ = [
    "MirroredStrategy",
    "OneDeviceStrategy",
    "CollectiveAllReduceStrategy",
    "ParameterServerStrategy",
    "AllReduceCrossDeviceOps",
    "BACKING",
]

BACKING = {
    "MirroredStrategy": "tf.compat.v1.distribute.MirroredStrategy (taking TF 1.15's num_gpus)",
    "OneDeviceStrategy": "tf.compat.v1.distribute.OneDeviceStrategy",
    "CollectiveAllReduceStrategy": (
        "tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy"
    ),
    "ParameterServerStrategy": "tf.compat.v1.distribute.experimental.ParameterServerStrategy",
    "AllReduceCrossDeviceOps": "tf.distribute.HierarchicalCopyAllReduce / NcclAllReduce",
}

OneDeviceStrategy = tf.distribute.OneDeviceStrategy
ParameterServerStrategy = tf.distribute.experimental.ParameterServerStrategy


def MirroredStrategy(  # noqa: N802  (stands in for the contrib class)
    devices: Optional[Sequence[str]] = None,
    num_gpus: Optional[int] = None,
    num_gpus_per_worker: Optional[int] = None,
    cross_device_ops: Any = None,
    auto_shard_dataset: bool = False,
    cross_tower_ops: Any = None,
):
    """``tf.contrib.distribute.MirroredStrategy``: TF 1.15's arguments, TF 2.15's strategy.

    Args:
      devices: the devices to mirror on; default from ``num_gpus``.
      num_gpus: mirror on the first ``num_gpus`` GPUs (0: the CPU); default every local GPU.
      num_gpus_per_worker: TF 1.15's other name for ``num_gpus``.
      cross_device_ops: how values are reduced across devices.
      auto_shard_dataset: accepted for TF 1.15's signature (TF 2.15 shards by its own policy).
      cross_tower_ops: TF 1.15's older name for ``cross_device_ops``.

    Returns:
      A ``tf.compat.v1.distribute.MirroredStrategy``.

    Raises:
      ValueError: if both ``num_gpus`` and ``num_gpus_per_worker``, or both
        ``cross_device_ops`` and ``cross_tower_ops``, are given.

    Example:

        strategy = MirroredStrategy(num_gpus=2)
    """
    del auto_shard_dataset
    if num_gpus is not None and num_gpus_per_worker is not None:
        raise ValueError(
            "Give `num_gpus` or `num_gpus_per_worker`, not both. Got: "
            f"num_gpus={num_gpus}, num_gpus_per_worker={num_gpus_per_worker}"
        )
    if cross_device_ops is not None and cross_tower_ops is not None:
        raise ValueError("Give `cross_device_ops` or `cross_tower_ops`, not both.")
    if num_gpus is None:
        num_gpus = num_gpus_per_worker
    if devices is None and num_gpus is not None:
        devices = [f"/device:GPU:{i}" for i in range(num_gpus)] or ["/device:CPU:0"]
    return tf.distribute.MirroredStrategy(
        devices=devices, cross_device_ops=cross_device_ops or cross_tower_ops
    )


def CollectiveAllReduceStrategy(  # noqa: N802  (stands in for the contrib class)
    num_gpus_per_worker: int = 0,
):
    """``tf.contrib.distribute.CollectiveAllReduceStrategy``: multi-worker all-reduce.

    The workers come from ``TF_CONFIG``; each uses its local GPUs (TF 2.15 does not take
    ``num_gpus_per_worker``: hide GPUs with ``CUDA_VISIBLE_DEVICES`` instead).

    Returns:
      A ``tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy``.

    Example:

        strategy = CollectiveAllReduceStrategy()
    """
    del num_gpus_per_worker
    return tf.distribute.experimental.MultiWorkerMirroredStrategy()


def AllReduceCrossDeviceOps(  # noqa: N802  (stands in for the contrib class)
    all_reduce_alg: str = "nccl", num_packs: int = 1
):
    """``tf.contrib.distribute.AllReduceCrossDeviceOps``: NCCL or hierarchical-copy all-reduce.

    Returns:
      ``tf.distribute.NcclAllReduce`` for ``"nccl"``, else ``HierarchicalCopyAllReduce``.

    Raises:
      ValueError: for another ``all_reduce_alg``.

    Example:

        ops = AllReduceCrossDeviceOps('hierarchical_copy')
    """
    if all_reduce_alg == "nccl":
        return tf.distribute.NcclAllReduce(num_packs=num_packs)
    if all_reduce_alg == "hierarchical_copy":
        return tf.distribute.HierarchicalCopyAllReduce(num_packs=num_packs)
    raise ValueError(
        "`all_reduce_alg` must be 'nccl' or 'hierarchical_copy'. Got: " + repr(all_reduce_alg)
    )
