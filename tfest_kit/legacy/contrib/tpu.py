"""TPU-only ``tf.tpu`` / ``tf.contrib.tpu`` functions as one replica computes them without a TPU.

TF 1.x scripts call these inside a ``TPUEstimator`` ``model_fn`` or around a session
(``tf.tpu.cross_replica_sum``, ``tf.tpu.rewrite``, ``tf.tpu.shard``, ``initialize_system``).
The official ones build ops (``CrossReplicaSum``, ``TPUReplicateMetadata`` …) that have no
CPU/GPU kernel, so a script falling back to CPU would die at the first ``session.run`` with
"No OpKernel was registered".  Here, when no TPU is in use (no official TPUEstimator was built
and no TPU is local, see ``tfest_kit.tpu.tpu_in_use``), each builds what a single
replica would have computed; on a TPU each is the official function.

- ``cross_replica_sum(x)`` over one replica is ``x``;
- ``rewrite`` / ``replicate`` (one replica) call the computation in place and return its
  outputs in the official layout (a flat list of tensors; a ``NoOp`` when there are none);
- ``shard`` / ``batch_parallel`` split the inputs, call the computation once per shard and
  join the outputs as the official function does (a ``cross_replica_sum`` inside a shard of
  more than one is refused: its sum would need the other shards);
- ``initialize_system`` gives an empty topology string, ``shutdown_system`` a ``NoOp``.

``bfloat16_scope`` and ``outside_compilation`` are the official functions: both already run
without a TPU.

Example:

    total = cross_replica_sum(loss)        # loss itself without a TPU
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

from tfest_kit._tf import tf
from tfest_kit.tpu import tpu_in_use

__all__ = [
    "cross_replica_sum",
    "rewrite",
    "replicate",
    "shard",
    "batch_parallel",
    "initialize_system",
    "shutdown_system",
]

_local = threading.local()


def _shards() -> int:
    return getattr(_local, "shards", 1)


def cross_replica_sum(x, group_assignment=None, name: Optional[str] = None):
    """``tf.tpu.cross_replica_sum``: the sum of ``x`` over the replicas; ``x`` for one replica.

    Args:
      x: the tensor to sum.
      group_assignment: replica groups (used on a TPU only).
      name: name of the op.

    Returns:
      A tensor like ``x``.

    Raises:
      ValueError: if called inside a ``shard`` of more than one shard without a TPU.

    Example:

        total = cross_replica_sum(loss)
    """
    if tpu_in_use():
        return tf.tpu.cross_replica_sum(x, group_assignment=group_assignment, name=name)
    if _shards() > 1:
        raise ValueError(
            f"cross_replica_sum inside tf.tpu.shard(num_shards={_shards()}) needs a TPU: "
            "without one, the legacy runner computes one replica. Use num_shards=1."
        )
    return tf.identity(x, name=name)


def _outputs(result: Any):
    # The official layout of one replica's outputs: tensors flattened, then a NoOp standing for
    # the operations when there are no tensors; tensors returned depend on those operations.
    flat = tf.nest.flatten(() if result is None else result)
    operations = [o for o in flat if isinstance(o, tf.Operation)]
    tensors = [
        o if o is None else tf.convert_to_tensor(o) for o in flat if not isinstance(o, tf.Operation)
    ]
    if not tensors:
        return tf.group(operations)
    with tf.control_dependencies(operations):
        return [t if t is None else tf.identity(t) for t in tensors]


def rewrite(
    computation: Callable[..., Any],
    inputs: Optional[Sequence[Any]] = None,
    infeed_queue=None,
    device_assignment=None,
    name: Optional[str] = None,
    xla_options=None,
):
    """``tf.tpu.rewrite``: ``computation(*inputs)`` in place without a TPU.

    Args:
      computation: the function to run.
      inputs: its positional arguments.
      infeed_queue: TPU only.
      device_assignment: TPU only.
      name: TPU only.
      xla_options: TPU only.

    Returns:
      As the official function: a list of the output tensors, or a ``NoOp`` if there are none.

    Example:

        (output,) = rewrite(lambda a: a * 2.0, [x])
    """
    if tpu_in_use():
        return tf.tpu.rewrite(
            computation, inputs, infeed_queue, device_assignment, name, xla_options
        )
    return _outputs(computation(*(inputs or [])))


def replicate(
    computation: Callable[..., Any],
    inputs: Optional[Sequence[Sequence[Any]]] = None,
    infeed_queue=None,
    device_assignment=None,
    name: Optional[str] = None,
    maximum_shapes=None,
    padding_spec=None,
    xla_options=None,
):
    """``tf.tpu.replicate`` for one replica: ``[outputs of computation(*inputs[0])]``.

    Args:
      computation: the function to run.
      inputs: one list of arguments per replica; only one replica runs without a TPU.
      infeed_queue: TPU only.
      device_assignment: TPU only.
      name: TPU only.
      maximum_shapes: TPU only.
      padding_spec: TPU only.
      xla_options: TPU only.

    Returns:
      A list with one replica's outputs, laid out as the official function does.

    Raises:
      ValueError: if ``inputs`` has more than one replica and there is no TPU.

    Example:

        [[output]] = replicate(lambda a: [a * 2.0], [[x]])
    """
    if tpu_in_use():
        return tf.tpu.replicate(
            computation,
            inputs,
            infeed_queue,
            device_assignment,
            name,
            maximum_shapes=maximum_shapes,
            padding_spec=padding_spec,
            xla_options=xla_options,
        )
    inputs = [[]] if inputs is None else list(inputs)
    if len(inputs) != 1:
        raise ValueError(
            f"`inputs` of tf.tpu.replicate must hold one replica without a TPU (the legacy "
            f"runner computes one). Got: {len(inputs)} replicas"
        )
    return [_outputs(computation(*inputs[0]))]


def shard(
    computation: Callable[..., Any],
    inputs: Optional[Sequence[Any]] = None,
    num_shards: int = 1,
    input_shard_axes: Optional[Sequence[int]] = None,
    outputs_from_all_shards: Union[bool, Sequence[bool]] = True,
    output_shard_axes: Optional[Sequence[int]] = None,
    infeed_queue=None,
    device_assignment=None,
    name: Optional[str] = None,
    xla_options=None,
):
    """``tf.tpu.shard``: the computation on each slice of the inputs, outputs joined.

    Without a TPU the shards run one after the other on this device; outputs are concatenated
    along ``output_shard_axes`` (stacked for scalars) or taken from the first shard, as in
    the official function.

    Args:
      computation: the function to run on each shard.
      inputs: tensors, each split into ``num_shards`` along its ``input_shard_axes`` entry.
      num_shards: how many shards.
      input_shard_axes: split axis per input (default 0).
      outputs_from_all_shards: per output (or for all): join all shards' or take the first.
      output_shard_axes: join axis per output (default 0).
      infeed_queue: TPU only.
      device_assignment: TPU only.
      name: TPU only.
      xla_options: TPU only.

    Returns:
      A list of output tensors, or a ``NoOp`` if the computation returns none.

    Raises:
      ValueError: for ``num_shards`` < 1 or axes lists whose length does not match.

    Example:

        (output,) = shard(lambda a: a + 1.0, [x], num_shards=2)
    """
    if tpu_in_use():
        return tf.tpu.shard(
            computation,
            inputs,
            num_shards,
            input_shard_axes,
            outputs_from_all_shards,
            output_shard_axes,
            infeed_queue,
            device_assignment,
            name,
            xla_options,
        )
    if not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"`num_shards` must be a positive integer. Got: {num_shards!r}")
    inputs = [tf.convert_to_tensor(x) for x in (inputs or [])]
    axes = [0] * len(inputs) if input_shard_axes is None else list(input_shard_axes)
    if len(axes) != len(inputs):
        raise ValueError(
            f"`input_shard_axes` must have one axis per input ({len(inputs)}). Got: {axes}"
        )
    split = [tf.split(x, num_shards, axis=a) for x, a in zip(inputs, axes)]
    per_shard = [list(s) for s in zip(*split)] if inputs else [[]] * num_shards
    outer, _local.shards = _shards(), num_shards
    try:
        results = [_outputs(computation(*args)) for args in per_shard]
    finally:
        _local.shards = outer
    if isinstance(results[0], tf.Operation):
        return [results[0]]
    count = len(results[0])
    out_axes = [0] * count if output_shard_axes is None else list(output_shard_axes)
    if isinstance(outputs_from_all_shards, bool):
        outputs_from_all_shards = [outputs_from_all_shards] * count
    if len(out_axes) != count or len(outputs_from_all_shards) != count:
        raise ValueError(
            f"`output_shard_axes` and `outputs_from_all_shards` must have one entry per output "
            f"({count}). Got: {out_axes}, {outputs_from_all_shards}"
        )
    joined = []
    for axis, everything, parts in zip(out_axes, outputs_from_all_shards, zip(*results)):
        if not everything:
            joined.append(parts[0])
        elif parts[0].shape.ndims == 0:
            joined.append(tf.stack(list(parts)))
        else:
            joined.append(tf.concat(list(parts), axis=axis))
    return joined


def batch_parallel(
    computation: Callable[..., Any],
    inputs: Optional[Sequence[Any]] = None,
    num_shards: int = 1,
    infeed_queue=None,
    device_assignment=None,
    name: Optional[str] = None,
    xla_options=None,
):
    """``tf.tpu.batch_parallel``: :func:`shard` along axis 0, every shard's outputs joined.

    Args:
      computation: the function to run on each shard.
      inputs: tensors split along their first axis.
      num_shards: how many shards.
      infeed_queue: TPU only.
      device_assignment: TPU only.
      name: TPU only.
      xla_options: TPU only.

    Returns:
      As :func:`shard`.

    Example:

        (output,) = batch_parallel(lambda a: a + 1.0, [x], num_shards=2)
    """
    if tpu_in_use():
        return tf.tpu.batch_parallel(
            computation, inputs, num_shards, infeed_queue, device_assignment, name, xla_options
        )
    return shard(computation, inputs, num_shards=num_shards)


def initialize_system(
    embedding_config=None,
    job: Optional[str] = None,
    compilation_failure_closes_chips: bool = True,
    tpu_cancellation_closes_chips=None,
):
    """``tf.tpu.initialize_system``: an empty serialized topology without a TPU.

    Returns:
      A string tensor (the official one holds the TPU topology).

    Example:

        session.run(initialize_system())
    """
    if tpu_in_use():
        return tf.tpu.initialize_system(
            embedding_config, job, compilation_failure_closes_chips, tpu_cancellation_closes_chips
        )
    return tf.constant(b"", name="tpu_topology_without_a_tpu")


def shutdown_system(job: Optional[str] = None):
    """``tf.tpu.shutdown_system``: a ``NoOp`` without a TPU.

    Returns:
      An operation.

    Example:

        session.run(shutdown_system())
    """
    if tpu_in_use():
        return tf.tpu.shutdown_system(job)
    return tf.no_op(name="shutdown_tpu_without_a_tpu")
