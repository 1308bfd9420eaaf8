"""``run_config`` and ``session_config``: an official ``RunConfig`` / ``ConfigProto`` back.

The CPU/GPU speed knobs (threads, XLA JIT, bfloat16, soft placement) live in a ``ConfigProto``
that ``RunConfig`` only takes whole; these build it from plain arguments.
"""

import contextlib
import math
import numbers
import os
from typing import Any, Optional, Union

import numpy as np

from tfest_kit._checks import check_int, is_int_at_least
from tfest_kit._tf import estimator, tf, tf2
from tfest_kit.cluster import validate_tf_config
from tfest_kit.logs import quieted

__all__ = ["run_config", "session_config"]

Threads = Union[int, tuple[int, int], None]
# Graph-mode (compat.v1) and TF2 strategies; anything else failed inside train().
_STRATEGY_TYPES = (tf.distribute.Strategy, tf2.distribute.Strategy)
# RunConfig's own checks fail on a wrong type with "'>=' not supported between 'str' and
# 'int'", and save_checkpoints_secs=0 silently saves no checkpoint at all.
_POSITIVE = {
    "save_checkpoints_secs": "None, with no save_checkpoints_steps, saves no checkpoints",
    "keep_checkpoint_every_n_hours": "hours",
    "session_creation_timeout_secs": "seconds",
}
_INTS = {  # int arguments: (smallest value, what None means)
    "save_checkpoints_steps": (1, ""),
    "save_summary_steps": (0, "0 or None: no summaries"),
    "log_step_count_steps": (1, "None: no step logs"),
    "keep_checkpoint_max": (0, "None or 0 keeps all"),
}
_warned: set = set()  # messages logged


def _thread_counts(threads: Threads) -> tuple[int, int]:
    """(inter_op, intra_op); 0 leaves that pool as it is (by default one thread per core)."""
    if threads is None:
        return 0, 0
    if isinstance(threads, tuple) and len(threads) == 2:
        return tuple(check_int(f"threads[{i}]", threads[i], 0, hint="0: as is") for i in (0, 1))
    if not is_int_at_least(threads, 1):
        raise ValueError(
            "`threads` must be None (TensorFlow's default), an int >= 1 for both pools, or a "
            f"tuple (inter_op, intra_op). Got: {threads!r}"
        )
    return int(threads), int(threads)


def _default_thread_count() -> int:
    """The size TensorFlow gives a pool left at 0: one thread per CPU this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _size_thread_pools(inter: int, intra: int) -> None:
    """Sets the process's pools too: ``Estimator.train`` runs an op (making the intra-op pool)
    before its Session exists, so a ConfigProto's count alone changed nothing."""
    if inter:
        with contextlib.suppress(RuntimeError):  # TensorFlow has run an op: too late
            tf2.config.threading.set_inter_op_parallelism_threads(inter)
    if not intra:
        return
    try:
        tf2.config.threading.set_intra_op_parallelism_threads(intra)
    except RuntimeError:  # the pool exists and keeps the size it was made with
        made = tf2.config.threading.get_intra_op_parallelism_threads() or _default_thread_count()
        message = (
            f"threads: this process's intra-op pool already exists ({made} threads), so "
            f"intra_op={intra} cannot take effect; call tfest_kit.run_config / "
            "session_config before TensorFlow runs anything (or train in a new process)."
        )
        if made != intra and message not in _warned:
            _warned.add(message)
            tf2.get_logger().warning(message)


def _check_session_args(xla: bool, threads: Threads, mixed_precision: Any, base: Any) -> tuple:
    """Validates the ConfigProto settings and sizes the pools; returns (inter, intra)."""
    if not isinstance(xla, (bool, np.bool_)):
        raise TypeError(f"`xla` must be True or False. Got: {xla!r} ({type(xla).__name__})")
    if mixed_precision not in (None, "bfloat16"):
        raise ValueError(
            "`mixed_precision` must be None (float32) or 'bfloat16' (oneDNN's rewrite for CPUs). "
            f"Got: {mixed_precision!r}. For float16 on a GPU, wrap the optimizer with "
            "tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite."
        )
    if base is not None and not isinstance(base, tf.ConfigProto):
        raise TypeError(
            "`base` (run_config's `session_config`) must be a tf.compat.v1.ConfigProto. "
            f"Got: {type(base).__name__}"
        )
    inter, intra = _thread_counts(threads)
    _size_thread_pools(inter, intra)
    return inter, intra


def _apply(base: Any, inter: int, intra: int, xla: bool, mixed_precision: Any) -> Any:
    """A copy of ``base`` (tensorflow_estimator's default if None) with the settings on."""
    proto = tf.ConfigProto()
    proto.CopyFrom(base or proto)  # a copy: the caller's is not changed
    rewrite = proto.graph_options.rewrite_options
    if base is None:  # Estimator's default: one Grappler pass (a bare one: BERT-tiny 3 % slower)
        rewrite.meta_optimizer_iterations = rewrite.ONE
    # Without soft placement a model_fn that pins an op to a GPU fails on a CPU-only machine.
    proto.allow_soft_placement = True
    proto.inter_op_parallelism_threads = inter or proto.inter_op_parallelism_threads
    proto.intra_op_parallelism_threads = intra or proto.intra_op_parallelism_threads
    if xla:
        proto.graph_options.optimizer_options.global_jit_level = tf.OptimizerOptions.ON_1
    if mixed_precision:
        rewrite.auto_mixed_precision_onednn_bfloat16 = rewrite.ON
    return proto


def _cpu_replicas(count: Optional[int], threads: Threads, kwargs: dict) -> Threads:
    """Validates ``cpu_replicas``, sets its strategy; returns the threads (intra-op 1)."""
    got = f"Got: cpu_replicas={count!r}"
    if kwargs.get("train_distribute") is not None:
        raise ValueError(f"Give `cpu_replicas` or `train_distribute`, not both. {got}")
    inter, intra = _thread_counts(threads)
    if intra not in (0, 1):
        raise ValueError(
            "`cpu_replicas` runs each replica's ops on one thread: leave the intra-op count out "
            f"of `threads` or make it 1. {got}, threads={threads!r}"
        )
    if validate_tf_config().get("cluster"):
        raise ValueError(
            "`cpu_replicas` trains on the cores of one machine, and TF_CONFIG describes a "
            f"cluster: use tfest_kit.cluster.multi_worker_strategy() there. {got}"
        )
    # The ConfigProto's device_count makes "/cpu:1" … in every Session, not in the eager
    # context: made eagerly, the strategy would place a variable there at once and fail.
    with tf.Graph().as_default():  # ReductionToOneDevice: MirroredStrategy's choice in graphs
        kwargs["train_distribute"] = tf2.distribute.MirroredStrategy(
            [f"/cpu:{i}" for i in range(count)],
            cross_device_ops=tf2.distribute.ReductionToOneDevice(),
        )
    return (inter, 1)


def session_config(
    *,
    xla: bool = False,
    threads: Threads = None,
    mixed_precision: Optional[str] = None,
    base: Optional[tf.ConfigProto] = None,
) -> tf.ConfigProto:
    """Builds the ``ConfigProto`` used by :func:`run_config`, for any ``RunConfig`` or Session.

    Args:
      xla, threads, mixed_precision: as in :func:`run_config`.
      base: a ``ConfigProto`` to start from (copied); ``None``: the one ``tf.estimator`` would
        use (in a ``TF_CONFIG`` cluster, with RunConfig's device filters).

    Returns:
      A new ``tf.compat.v1.ConfigProto`` with ``allow_soft_placement`` on.

    Raises:
      TypeError, ValueError: as :func:`run_config` does.

    Example:

        tpu.RunConfig(session_config=tfest_kit.session_config(threads=4), model_dir="/tmp/m")
    """
    # RunConfig parses TF_CONFIG itself and fails with a bare JSONDecodeError / KeyError.
    cluster = validate_tf_config(workers_only_allowed=True).get("cluster", {})
    inter, intra = _check_session_args(xla, threads, mixed_precision, base)
    if base is None and cluster and set(cluster) != {"worker"}:
        with quieted():  # RunConfig's "TF_CONFIG environment variable: …" line would repeat
            base = estimator.RunConfig().session_config  # with the cluster's device filters
    return _apply(base, inter, intra, xla, mixed_precision)


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
    iterations_per_loop: Optional[int] = None,
    **kwargs: Any,
) -> estimator.RunConfig:
    """Returns an official ``tf.estimator.RunConfig`` with thread, XLA and placement settings.

    Every argument is checked here, by name, where RunConfig fails late or unclearly.

    Args:
      model_dir: where the Estimator writes checkpoints and summaries (``~`` expanded).
      xla: XLA JIT (``global_jit_level = ON_1``), for GPUs: on the CPU TF 2.15 compiles nothing
        without ``TF_XLA_FLAGS=--tf_xla_cpu_global_jit``, and with it BERT-tiny ran 25-30 % slower.
      threads: ``None`` (one thread per core), an int for both pools, or ``(inter_op, intra_op)``
        (0: as is; ``(0, 1)`` for a small model, docs/performance.md). Set for the process too:
        call this before TensorFlow runs anything (else a warning says so).
      mixed_precision: ``None`` (float32) or ``"bfloat16"``, oneDNN's, on the CPU; variables stay
        float32. With AVX512-BF16 BERT-tiny trained 20-25 % faster, MobileNetV2 20 % slower.
      cpu_replicas: N >= 2 trains N replicas on the CPU (a ``MirroredStrategy``, one thread per
        op; BERT-tiny 1.2-1.3x faster with 2 on 2 cores); the optimizer must aggregate replicas
        (``tf.compat.v1.train``'s do). ``None`` or 1: one copy.
      seed: graph-level random seed (RunConfig's ``tf_random_seed`` is taken too).
      save_checkpoints_steps: checkpoint every N steps; ``None``: every 600 seconds.
      log_step_count_steps: how often ``global_step/sec`` and the loss are logged; None: never.
      keep_checkpoint_max: how many recent checkpoints to keep; None or 0 keeps all.
      iterations_per_loop: N > 1 trains N steps per ``Session.run`` in ``tpu.TPUEstimator`` and
        ``keras_bridge.to_estimator`` (hooks run once per loop: docs/performance.md); given, the
        config is a ``tpu.RunConfig``. ``tf.estimator.Estimator`` ignores it.
      **kwargs: any other ``RunConfig`` argument; ``session_config`` is the base proto.

    Returns:
      A ``tf.estimator.RunConfig`` whose ``session_config`` adds the settings to the one
      ``tf.estimator`` would use (with RunConfig's device filters in a cluster).

    Raises:
      ValueError: a malformed value or ``TF_CONFIG``, or arguments that contradict each other.
      TypeError: a value of the wrong type; RunConfig's own for a keyword it does not take.

    Example:

        config = tfest_kit.run_config(model_dir="/tmp/model", threads=(2, 4), seed=0)
    """
    kwargs["tf_random_seed"] = _seed(seed, kwargs.get("tf_random_seed"))
    kwargs["log_step_count_steps"] = log_step_count_steps
    kwargs["keep_checkpoint_max"] = keep_checkpoint_max
    if save_checkpoints_steps is not None:  # an explicit None would turn time-based ones off too
        kwargs["save_checkpoints_steps"] = save_checkpoints_steps
    _check_run_config_keywords(kwargs)
    hint = "None or 1: no replicas"
    cpu_replicas = check_int("cpu_replicas", cpu_replicas, allow_none=True, hint=hint)
    cpu_replicas = None if cpu_replicas == 1 else cpu_replicas
    if cpu_replicas:
        threads = _cpu_replicas(cpu_replicas, threads, kwargs)
    # A training strategy runs workers only and sets devices up itself (no device filters).
    strategies = [kwargs.get(k) for k in ("train_distribute", "eval_distribute")]
    experimental = kwargs.get("experimental_distribute")
    training = strategies[0] or getattr(experimental, "train_distribute", None)
    validate_tf_config(workers_only_allowed=training is not None)
    base = kwargs.pop("session_config", None)
    inter, intra = _check_session_args(xla, threads, mixed_precision, base)
    loop = check_int("iterations_per_loop", iterations_per_loop, allow_none=True)
    if loop is not None:  # where TPUEstimator and the official code read it
        kwargs["tpu_config"] = estimator.tpu.TPUConfig(iterations_per_loop=loop)
    config_class = estimator.RunConfig if loop is None else estimator.tpu.RunConfig
    model_dir = model_dir and os.path.expanduser(model_dir)  # else a directory named "~"
    config = config_class(model_dir=model_dir, session_config=base, **kwargs)
    if base is None and not any(s is not None for s in (*strategies, experimental)):
        base = config.session_config  # RunConfig's own: with device filters in a cluster
    proto = _apply(base, inter, intra, xla, mixed_precision)
    if cpu_replicas:
        proto.device_count["CPU"] = cpu_replicas
    return config.replace(session_config=proto)


def _seed(seed: Optional[int], tf_random_seed: Optional[int]) -> Optional[int]:
    seed = check_int("seed", seed, 0, allow_none=True)
    tf_random_seed = check_int("tf_random_seed", tf_random_seed, 0, allow_none=True)
    if seed is not None and tf_random_seed is not None and seed != tf_random_seed:
        raise ValueError(
            "`seed` and `tf_random_seed` (RunConfig's name for the same seed) differ; give one "
            f"of them. Got: seed={seed!r}, tf_random_seed={tf_random_seed!r}"
        )
    return tf_random_seed if seed is None else seed


def _check_run_config_keywords(kwargs: dict) -> None:
    """Names a value of the wrong kind before any work (RunConfig's errors name none)."""
    for name, hint in _POSITIVE.items():
        value = kwargs.get(name)
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if value is not None and not (number and 0 < value < math.inf):
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
                f"`{name}` must be a tf.distribute strategy (e.g. tf.distribute.MirroredStrategy()"
                f") or None. Got: {strategy!r} ({type(strategy).__name__})"
            )
