"""``run_config`` and ``session_config``: an official ``RunConfig`` / ``ConfigProto`` back.

The knobs that decide CPU/GPU speed (inter-/intra-op threads, XLA JIT, bfloat16 mixed
precision, soft placement) live in a ``tf.compat.v1.ConfigProto`` that ``RunConfig`` only
accepts whole. These helpers build it from plain arguments and return the unmodified official
classes, so everything that takes a ``RunConfig`` keeps working.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import numbers
import os
import sys
from typing import Any, Optional, Union

import numpy as np

from tfest_kit._checks import check_int, did_you_mean, is_int_at_least
from tfest_kit._tf import estimator, tf, tf2
from tfest_kit.cluster import validate_tf_config
from tfest_kit.logs import quieted

__all__ = ["run_config", "session_config"]

# CPU flags (Linux /proc/cpuinfo names) of instructions oneDNN runs bfloat16 matmuls with.
_NATIVE_BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "avx_ne_convert"})

Threads = Union[int, tuple[int, int], None]
# The graph-mode (compat.v1) and TF2 strategy base classes: Estimator takes either.
_STRATEGY_TYPES = (tf.distribute.Strategy, tf2.distribute.Strategy)
# Arguments of TPUEstimator's RunConfig (and its TPUConfig) that tf.estimator's does not take.
_TPU_RUN_CONFIG_ARGS = frozenset(
    ["tpu_config", "master", "evaluation_master", "cluster", "iterations_per_loop", "num_shards"]
)


def _thread_counts(threads: Threads) -> tuple[int, int]:
    """Returns (inter_op, intra_op); 0 leaves that count as it is (by default one per core)."""
    if threads is None:
        return 0, 0
    if isinstance(threads, tuple) and len(threads) == 2:
        inter = check_int("threads[0]", threads[0], 0, hint="inter-op threads, 0 = leave as is")
        intra = check_int("threads[1]", threads[1], 0, hint="intra-op threads, 0 = leave as is")
        return inter, intra
    if not is_int_at_least(threads, 1):
        raise ValueError(
            "`threads` must be None (TensorFlow's default), an int >= 1 used for both the "
            f"inter- and intra-op pools, or a tuple (inter_op, intra_op). Got: {threads!r}"
        )
    return int(threads), int(threads)


def _default_proto() -> Any:
    """tensorflow_estimator's default: one Grappler pass (a bare one: BERT-tiny 3 % slower)."""
    proto = tf.ConfigProto(allow_soft_placement=True)
    rewrite = proto.graph_options.rewrite_options
    rewrite.meta_optimizer_iterations = rewrite.ONE
    return proto


def _cpu_flags() -> Optional[frozenset]:
    """The CPU's feature flags, or None where they cannot be read (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return None


def _bfloat16_problem() -> Optional[str]:
    """Why bfloat16 mixed precision would not help here, or None."""
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "")
    if onednn.strip().lower() in ("0", "false"):
        # TensorFlow skips the rewrite without a word when oneDNN is off.
        return (
            f"mixed_precision='bfloat16' needs oneDNN, which TF_ENABLE_ONEDNN_OPTS={onednn} "
            "turns off: TensorFlow will train in float32."
        )
    flags = _cpu_flags() if sys.platform.startswith("linux") else None
    if flags is not None and not flags & _NATIVE_BFLOAT16_FLAGS:
        return (
            "mixed_precision='bfloat16': this CPU has no bfloat16 instructions "
            f"({' / '.join(sorted(_NATIVE_BFLOAT16_FLAGS))}), so oneDNN emulates them and "
            "training may be slower than in float32."
        )
    return None


_warned: set = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        tf2.get_logger().warning(message)


def _default_thread_count() -> int:
    """The size TensorFlow gives a pool left at 0: one thread per CPU this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _size_thread_pools(inter: int, intra: int) -> None:
    """Makes ``threads`` hold for the process, as far as TensorFlow still allows it.

    TensorFlow makes one intra-op pool per process when it first runs an op (``Estimator.train``
    does so before its Session exists), so a ConfigProto's count alone changed nothing. A
    later inter-op count than the first Session's goes by without a word (not visible here).
    """
    if inter:
        with contextlib.suppress(RuntimeError):  # TensorFlow has run an op: too late
            tf2.config.threading.set_inter_op_parallelism_threads(inter)
    if not intra:
        return
    try:
        tf2.config.threading.set_intra_op_parallelism_threads(intra)
    except RuntimeError:  # TensorFlow has run an op: its pool keeps the size it was made with
        made = tf2.config.threading.get_intra_op_parallelism_threads() or _default_thread_count()
        if made != intra:
            _warn_once(
                f"threads: this process's intra-op pool already exists ({made} threads), so "
                f"intra_op={intra} cannot take effect; call tfest_kit.run_config / "
                "session_config before TensorFlow runs anything (or train in a new process)."
            )


def _cpu_replica_threads(cpu_replicas: Optional[int], threads: Threads, kwargs: dict) -> Threads:
    """Validates ``cpu_replicas``; returns the thread counts (intra-op 1 for replicas)."""
    if cpu_replicas is None:
        return threads
    if kwargs.get("train_distribute") is not None:
        raise ValueError(
            "Give `cpu_replicas` or `train_distribute`, not both: cpu_replicas is a "
            f"MirroredStrategy over this machine's CPU cores. Got: cpu_replicas={cpu_replicas!r}"
            f" and train_distribute={kwargs['train_distribute']!r}"
        )
    inter, intra = _thread_counts(threads)
    if intra not in (0, 1):
        raise ValueError(
            "`cpu_replicas` runs each replica's ops on one thread (intra-op 1); leave the "
            "intra-op count out of `threads` or make it 1. "
            f"Got: cpu_replicas={cpu_replicas!r}, threads={threads!r}"
        )
    if validate_tf_config().get("cluster"):
        raise ValueError(
            "`cpu_replicas` trains on the cores of one machine, and TF_CONFIG describes a "
            "cluster: use tfest_kit.cluster.multi_worker_strategy() (or no strategy) there. "
            f"Got: cpu_replicas={cpu_replicas!r}"
        )
    if tf2.config.list_physical_devices("GPU"):
        _warn_once(
            "cpu_replicas places every replica on the CPU, and this machine has a GPU: for "
            "the GPU give train_distribute=tf.distribute.MirroredStrategy() instead."
        )
    return (inter, 1)


def _cpu_replicas_strategy(count: int) -> Any:
    """A ``MirroredStrategy`` over ``count`` CPU devices, which the Sessions make."""
    # The ConfigProto's device_count makes "/cpu:1" … exist in every Session, not in the eager
    # context. Made in a graph, the strategy leaves that context alone: eagerly it would place
    # a variable on "/cpu:1" at once, which fails (and would make the intra-op pool before its
    # size is set). ReductionToOneDevice: MirroredStrategy's own choice in graph mode.
    with tf.Graph().as_default():
        return tf2.distribute.MirroredStrategy(
            [f"/cpu:{i}" for i in range(count)],
            cross_device_ops=tf2.distribute.ReductionToOneDevice(),
        )


def _check_session_args(xla: bool, threads: Threads, mixed_precision: Any, base: Any) -> tuple:
    """Validates the ConfigProto settings; returns (inter, intra, bfloat16)."""
    if not isinstance(xla, (bool, np.bool_)):
        raise TypeError(f"`xla` must be True or False. Got: {xla!r} ({type(xla).__name__})")
    if mixed_precision not in (None, "bfloat16"):
        raise ValueError(
            "`mixed_precision` must be None (float32) or 'bfloat16' (oneDNN's bfloat16 "
            f"rewrite for CPUs). Got: {mixed_precision!r}. For float16 on a GPU, wrap the "
            "optimizer with tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite, "
            "which adds the loss scaling float16 gradients need."
        )
    problem = mixed_precision and _bfloat16_problem()
    if problem:
        _warn_once(problem)
    inter, intra = _thread_counts(threads)
    if base is not None and not isinstance(base, tf.ConfigProto):
        raise TypeError(
            "`base` (run_config's `session_config`) must be a tf.compat.v1.ConfigProto. "
            f"Got: {type(base).__name__}"
        )
    return inter, intra, bool(mixed_precision)


def _apply(base: Any, inter: int, intra: int, xla: bool, bfloat16: bool) -> Any:
    """A copy of ``base`` (tensorflow_estimator's default if None) with the settings on."""
    proto = tf.ConfigProto()
    proto.CopyFrom(_default_proto() if base is None else base)
    # Without soft placement a model_fn that pins an op to a GPU fails on a CPU-only machine.
    proto.allow_soft_placement = True
    if inter:
        proto.inter_op_parallelism_threads = inter
    if intra:
        proto.intra_op_parallelism_threads = intra
    if xla:
        proto.graph_options.optimizer_options.global_jit_level = tf.OptimizerOptions.ON_1
    if bfloat16:
        rewrite = proto.graph_options.rewrite_options
        rewrite.auto_mixed_precision_onednn_bfloat16 = rewrite.ON
    return proto


def session_config(
    *,
    xla: bool = False,
    threads: Threads = None,
    mixed_precision: Optional[str] = None,
    base: Optional[tf.ConfigProto] = None,
) -> tf.ConfigProto:
    """Builds the ``ConfigProto`` used by :func:`run_config`, for any ``RunConfig`` or Session.

    Args:
      xla: turn on XLA JIT compilation (``global_jit_level = ON_1``).
      threads: ``None``, an int for both thread pools, or ``(inter_op, intra_op)``; as in
        :func:`run_config`, the counts are also given to the process.
      mixed_precision: ``None`` (float32) or ``"bfloat16"``: see :func:`run_config`.
      base: a ``tf.compat.v1.ConfigProto`` to start from (copied, not changed); ``None``
        starts from the one ``tf.estimator`` would use (in a ``TF_CONFIG`` cluster, with
        RunConfig's device filters).

    Returns:
      A new ``tf.compat.v1.ConfigProto`` with ``allow_soft_placement`` on, whatever ``base``
      says (without it a model_fn that pins an op to a GPU fails on a CPU-only machine).

    Raises:
      TypeError: if ``base`` is not a ConfigProto or ``xla`` is not a bool.
      ValueError: if ``threads``, ``mixed_precision`` or ``TF_CONFIG`` is malformed.

    Example:

        # tpu.RunConfig is not what run_config() returns; give it the ConfigProto instead.
        config = tfest_kit.tpu.RunConfig(
            model_dir="/tmp/bert",
            session_config=tfest_kit.session_config(mixed_precision="bfloat16"),
        )
    """
    # RunConfig parses TF_CONFIG itself and fails with a bare JSONDecodeError / KeyError.
    cluster = validate_tf_config(workers_only_allowed=True).get("cluster", {})
    inter, intra, bfloat16 = _check_session_args(xla, threads, mixed_precision, base)
    _size_thread_pools(inter, intra)
    if base is None and cluster and set(cluster) != {"worker"}:
        with quieted():  # a second "TF_CONFIG environment variable: …" line would be a duplicate
            base = estimator.RunConfig().session_config  # with the cluster's device filters
    return _apply(base, inter, intra, xla, bfloat16)


def run_config(
    *,
    model_dir: Optional[str] = None,
    xla: bool = False,
    threads: Threads = None,
    mixed_precision: Optional[str] = None,
    cpu_replicas: Optional[int] = None,
    seed: Optional[int] = None,
    save_checkpoints_steps: Optional[int] = None,
    log_step_count_steps: Optional[int] = 100,
    keep_checkpoint_max: Optional[int] = 5,
    **kwargs: Any,
) -> estimator.RunConfig:
    """Returns an official ``tf.estimator.RunConfig`` with thread, XLA and placement settings.

    Args:
      model_dir: where the Estimator writes checkpoints and summaries.
      xla: compile the graph with XLA JIT (``global_jit_level = ON_1``), for GPUs: on the CPU
        TensorFlow 2.15 compiles nothing at this level unless
        ``TF_XLA_FLAGS=--tf_xla_cpu_global_jit`` is set, and with it BERT-tiny trained
        25-30 % slower here (``benchmarks/``).
      threads: ``None`` keeps TensorFlow's default (one thread per core in each pool); an int
        sets both the inter- and the intra-op pool; ``(inter_op, intra_op)`` each (0 leaves
        one as it is). TensorFlow's pools are per process, so the counts are also set there
        (``tf.config.threading``): call this before TensorFlow runs anything (a warning names
        an intra-op count that can no longer take effect).
      mixed_precision: ``None`` (float32) or ``"bfloat16"``: oneDNN's automatic mixed
        precision on the CPU; variables, checkpoints, exports and updates stay float32. On an
        AVX512-BF16 CPU BERT-tiny trained 20-25 % faster, MobileNetV2 20 % slower: measure
        (``docs/performance.md``). A warning says when it cannot help.
      cpu_replicas: N >= 2 trains N replicas side by side on the CPU, each op on one thread:
        a ``MirroredStrategy`` over N CPU devices as ``train_distribute`` (BERT-tiny 1.2-1.3×
        faster with 2 on 2 cores). Batches and batch norm are per replica, as on TPU cores;
        the optimizer must aggregate replicas (``tf.compat.v1.train``'s do, BERT's
        ``optimization.py`` does not). ``None`` or 1: one copy.
      seed: graph-level random seed; ``tf_random_seed``, RunConfig's name for it, is taken too.
      save_checkpoints_steps: checkpoint every N steps; ``None`` keeps RunConfig's default
        (every 600 seconds).
      log_step_count_steps: how often the Estimator logs ``global_step/sec`` and the loss;
        None turns it off.
      keep_checkpoint_max: how many recent checkpoints to keep; None or 0 keeps all.
      **kwargs: any other ``RunConfig`` argument; a ``session_config`` is the base the
        settings above apply to (``allow_soft_placement`` on).

    Returns:
      A ``tf.estimator.RunConfig``; its ``session_config`` carries the settings on top of
      the ``ConfigProto`` ``tf.estimator`` would use (in a ``TF_CONFIG`` cluster without a
      strategy, with RunConfig's device filters).

    Raises:
      ValueError: for a malformed count, duration, ``threads``, ``mixed_precision`` or
        ``TF_CONFIG``; ``cpu_replicas`` with ``train_distribute``, intra-op threads or a
        cluster; ``seed`` and ``tf_random_seed`` that differ.
      TypeError: for a non-bool ``xla``, a ``session_config`` that is no ConfigProto, a
        ``*_distribute`` that is no strategy, a keyword RunConfig does not take.

    Example:

        config = tfest_kit.run_config(model_dir="/tmp/model", threads=(2, 4), seed=0)
        estimator = tf.estimator.Estimator(model_fn, config=config)
    """
    kwargs["tf_random_seed"] = _seed(seed, kwargs.get("tf_random_seed"))
    kwargs.update(
        log_step_count_steps=log_step_count_steps, keep_checkpoint_max=keep_checkpoint_max
    )
    if save_checkpoints_steps is not None:
        # Passing None explicitly would switch time-based checkpoints off as well.
        kwargs["save_checkpoints_steps"] = save_checkpoints_steps
    _check_run_config_keywords(kwargs)
    cpu_replicas = check_int(
        "cpu_replicas", cpu_replicas, allow_none=True, hint="None or 1: no replicas"
    )
    cpu_replicas = None if cpu_replicas == 1 else cpu_replicas
    threads = _cpu_replica_threads(cpu_replicas, threads, kwargs)
    if cpu_replicas:
        kwargs["train_distribute"] = _cpu_replicas_strategy(cpu_replicas)
    # A training strategy runs a cluster of workers only; any strategy sets the cluster's
    # devices up itself (then no device filters).
    strategies = [kwargs.get(k) for k in ("train_distribute", "eval_distribute")]
    experimental = kwargs.get("experimental_distribute")
    training = strategies[0] or getattr(experimental, "train_distribute", None)
    validate_tf_config(workers_only_allowed=training is not None)
    base = kwargs.pop("session_config", None)
    inter, intra, bfloat16 = _check_session_args(xla, threads, mixed_precision, base)
    _size_thread_pools(inter, intra)
    config = estimator.RunConfig(model_dir=model_dir, session_config=base, **kwargs)
    if base is None and not any(s is not None for s in (*strategies, experimental)):
        base = config.session_config  # RunConfig's own: with device filters in a cluster
    proto = _apply(base, inter, intra, xla, bfloat16)
    if cpu_replicas:
        proto.device_count["CPU"] = cpu_replicas
    return config.replace(session_config=proto)


def _seed(seed: Optional[int], tf_random_seed: Optional[int]) -> Optional[int]:
    """``seed``, or RunConfig's own name for it (scripts that move from RunConfig keep it)."""
    seed = check_int("seed", seed, 0, allow_none=True)
    tf_random_seed = check_int("tf_random_seed", tf_random_seed, 0, allow_none=True)
    if seed is not None and tf_random_seed is not None and seed != tf_random_seed:
        raise ValueError(
            "`seed` and `tf_random_seed` (RunConfig's name for the same seed) differ; give one "
            f"of them. Got: seed={seed!r}, tf_random_seed={tf_random_seed!r}"
        )
    return tf_random_seed if seed is None else seed


# RunConfig's own range checks name the argument; on a value of the wrong type they fail with
# "'>=' not supported between instances of 'str' and 'int'", and save_checkpoints_secs=0
# silently saves no checkpoint at all.
_POSITIVE = {
    "save_checkpoints_secs": "None, with no save_checkpoints_steps, saves no checkpoints",
    "keep_checkpoint_every_n_hours": "hours",
    "session_creation_timeout_secs": "seconds",
}
# Int arguments: (smallest value, what None means).
_INTS = {
    "save_checkpoints_steps": (1, ""),
    "save_summary_steps": (0, "0 or None: no summaries"),
    "log_step_count_steps": (1, "None: no step logs"),
    "keep_checkpoint_max": (0, "None or 0 keeps all"),
}


def _check_run_config_keywords(kwargs: dict) -> None:
    """Names a keyword RunConfig does not take, or a value of the wrong kind, before any work."""
    known = [p for p in inspect.signature(estimator.RunConfig.__init__).parameters if p != "self"]
    for name in kwargs:
        if name in _TPU_RUN_CONFIG_ARGS:
            raise TypeError(
                f"run_config() got {name!r}, an argument of TPUEstimator's RunConfig: use "
                f"tfest_kit.tpu.RunConfig({name}=…, session_config=tfest_kit.session_config(…))."
            )
        if name not in known:
            fix = did_you_mean(name, known) or f" It takes: {', '.join(known)}."
            raise TypeError(f"run_config() got {name!r}, not a RunConfig argument.{fix}")
    for name, hint in _POSITIVE.items():
        value = kwargs.get(name)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not 0 < value < math.inf
        ):
            raise ValueError(f"`{name}` must be a number > 0 ({hint}). Got: {value!r}")
    for name, (minimum, hint) in _INTS.items():
        if name in kwargs:
            kwargs[name] = check_int(name, kwargs[name], minimum, allow_none=True, hint=hint)
    if kwargs.get("save_checkpoints_steps") and kwargs.get("save_checkpoints_secs") is not None:
        raise ValueError(
            "Give `save_checkpoints_steps` or `save_checkpoints_secs`, not both. "
            f"Got: {kwargs['save_checkpoints_steps']!r} and {kwargs['save_checkpoints_secs']!r}"
        )
    for name in ("train_distribute", "eval_distribute"):
        strategy = kwargs.get(name)
        if strategy is not None and not isinstance(strategy, _STRATEGY_TYPES):
            raise TypeError(
                f"`{name}` must be a tf.distribute strategy (e.g. "
                "tf.distribute.MirroredStrategy()) or None. "
                f"Got: {strategy!r} ({type(strategy).__name__})"
            )
