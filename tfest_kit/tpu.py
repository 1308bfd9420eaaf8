"""A drop-in ``TPUEstimator``: the official one on a TPU, a logging ``Estimator`` elsewhere.

Off a TPU it injects ``params['batch_size']``, converts ``TPUEstimatorSpec`` and logs ``loss,
step`` with examples/sec, unlike ``TPUEstimator(use_tpu=False)``. TPU detection never asks the
GCE metadata server. Also serves ``tf.contrib.tpu``.
"""

import copy
import functools
import os
import weakref
from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

from tfest_kit._checks import check_int
from tfest_kit._loop import fetch_errors, loop_length, training_loop, with_loss_line, with_run_hooks
from tfest_kit._model_dir import grpc_reachable, usable_checkpoint
from tfest_kit._model_fn_call import call_model_fn, call_with_args, label_errors, model_fn_args
from tfest_kit._task_guard import EndlessPredictWarning, guarded_eval_hooks, guarded_train
from tfest_kit._tf import tf, tf2
from tfest_kit._warm_start import check_model_dir, with_saver
from tfest_kit.cluster import validate_tf_config
from tfest_kit.config import session_config
from tfest_kit.inputs import read_errors

__all__ = ["TPUEstimator", "TPUEstimatorSpec", "RunConfig", "TPUConfig", "InputPipelineConfig"]
__all__ += ["CrossShardOptimizer", "TPUClusterResolver", "NoTPUClusterResolver", "tpu_available"]

TPUEstimatorSpec = tf.estimator.tpu.TPUEstimatorSpec
TPUConfig = tf.estimator.tpu.TPUConfig
InputPipelineConfig = tf.estimator.tpu.InputPipelineConfig
# The official TPUEstimator reserves these params keys ('use_tpu' is set, not reserved).
_RESERVED_PARAMS_KEYS = ("batch_size", "context")
_ON_A_TPU = "TPUEstimatorSpec: {}, accepted off a TPU (as by TPUEstimator) but refused on one: {}"
_MODES = tf.estimator.ModeKeys
_BATCH_ARG = {
    _MODES.TRAIN: "train_batch_size",
    _MODES.EVAL: "eval_batch_size",
    _MODES.PREDICT: "predict_batch_size",
}
_OfficialResolver = tf2.distribute.cluster_resolver.TPUClusterResolver
TPUName = Union[None, str, Sequence[str]]  # a TPU name, grpc:// address, or a list of one
# The legacy runner sets "loops" False: TF 1.15 ran one step per Session.run off a TPU.
_state = {"official_estimator_built": False, "loops": True}
# The official as_estimator_spec() reads host calls from a class attribute the last
# TPUEstimatorSpec overwrote; _to_estimator_spec reads the fields.
_TPU_SPEC_TYPES = tuple(c for c in TPUEstimatorSpec.__mro__ if c not in (tuple, object))


class RunConfig(tf.estimator.tpu.RunConfig):
    """The official ``tpu.RunConfig``; a malformed ``TF_CONFIG`` is a ValueError naming the part
    (a bare ``JSONDecodeError``, or a task index out of range taken for a missing chief).

    Example:

        config = tpu.RunConfig(model_dir="/tmp/run", save_checkpoints_steps=100)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        validate_tf_config(workers_only_allowed=True)
        super().__init__(*args, **kwargs)


@functools.lru_cache(maxsize=1)
def _local_tpu() -> bool:
    # Physical devices: listing logical ones initialises the runtime.
    return bool(tf2.config.list_physical_devices("TPU"))


def _tpu_name(tpu) -> Optional[str]:
    tpu = (tpu[0] if tpu else None) if isinstance(tpu, (list, tuple)) else tpu  # [FLAGS.tpu]
    return tpu or os.environ.get("TPU_NAME") or None


class NoTPUClusterResolver(tf2.distribute.cluster_resolver.ClusterResolver):
    """A resolver meaning "no TPU": empty cluster spec, master ``""``.

    Example:

        config = tpu.RunConfig(cluster=tpu.TPUClusterResolver())  # no TPU: runs on CPU/GPU
    """

    def __init__(self, reason: str = "no TPU found") -> None:
        self.reason = reason
        self.task_type = self.task_id = self.rpc_layer = None

    def cluster_spec(self):
        return tf.train.ClusterSpec({})

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        return ""

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        return {}

    def __repr__(self) -> str:
        return f"NoTPUClusterResolver(reason={self.reason!r})"


def _official_resolver(name: str, zone, project, **kw) -> Any:
    """The official resolver for ``name``, or an exception saying why it does not resolve."""
    if name.startswith("grpc://") and not grpc_reachable(name, timeout=3.0):
        raise ConnectionError(f"nothing answers at {name}")
    resolver = _OfficialResolver(tpu=name, zone=zone, project=project, **kw)
    if not resolver.master():
        raise ConnectionError(f"the resolver for {name!r} returned no master")
    return resolver


def TPUClusterResolver(
    tpu: TPUName = None, zone: Optional[str] = None, project: Optional[str] = None, **kw
):
    """The official ``TPUClusterResolver`` if a TPU resolves, else a ``NoTPUClusterResolver``.

    With no name (argument or ``TPU_NAME``) only local devices are looked at: the official
    class would ask the GCE metadata server.

    Args:
      tpu: TPU name or ``grpc://host:port`` (or a list of one); None reads ``TPU_NAME``.
      zone, project, **kw: for the official resolver.

    Returns:
      The official resolver, or a ``NoTPUClusterResolver`` (whose ``master()`` is ``""``).

    Example:

        config = RunConfig(cluster=TPUClusterResolver(FLAGS.tpu_name), model_dir=...)
    """
    if (name := _tpu_name(tpu)) is None:
        if _local_tpu():
            return _OfficialResolver(tpu="local", **kw)
        return NoTPUClusterResolver("no TPU name given and no local TPU device")
    try:
        return _official_resolver(name, zone, project, **kw)
    except Exception as e:  # any failure to resolve means: run without a TPU
        tf.logging.warning("TPU %r did not resolve (%s); running without a TPU.", name, e)
        return NoTPUClusterResolver(f"TPU {name!r} did not resolve: {e}")


def tpu_available(tpu: TPUName = None) -> bool:
    """Whether a TPU is reachable: ``tpu`` as for ``TPUClusterResolver``; with no name (nor
    ``TPU_NAME``) local devices only, no network.

    Example:

        use_tpu = tpu.tpu_available(FLAGS.tpu_name)
    """
    if (name := _tpu_name(tpu)) is None:
        return _local_tpu()
    try:
        _official_resolver(name, None, None)
    except Exception as e:  # noqa: BLE001  (not resolving is the answer, not an error)
        tf.logging.info("TPU %r is not available: %s", name, e)
        return False
    return True


def tpu_in_use() -> bool:
    """Whether TPU-only ops may be built (an official TPUEstimator was built, or a local TPU)."""
    return _state["official_estimator_built"] or _local_tpu()


def CrossShardOptimizer(  # noqa: N802  (stands in for the official class)
    opt, reduction: Optional[str] = None, name: str = "CrossShardOptimizer", group_assignment=None
):
    """The official ``tf.compat.v1.tpu.CrossShardOptimizer`` on a TPU, ``opt`` itself otherwise.

    Off a TPU, the official ``cross_replica_sum`` has no CPU kernel.

    Example:

        optimizer = CrossShardOptimizer(tf.compat.v1.train.AdamOptimizer(1e-3))
    """
    if not tpu_in_use():
        return opt
    kwargs = {"reduction": reduction} if reduction is not None else {}
    return tf.tpu.CrossShardOptimizer(opt, name=name, group_assignment=group_assignment, **kwargs)


class _HostCallHook(tf.train.SessionRunHook):
    """Runs a ``host_call``'s ops each step (in a loop, for each queued step after it: a TPU's
    outfeed; ``pending``: the queue's size); initialises and flushes the v2 summary writers."""

    def __init__(self, fetches: Any, pending: Optional[tf.Tensor] = None) -> None:
        self._fetches, self._pending = fetches, pending

    def begin(self) -> None:
        self._init_ops = tf.get_collection("_SUMMARY_WRITER_V2")
        writers = [op.inputs[0] for op in self._init_ops]
        self._flush_ops = [tf2.raw_ops.FlushSummaryWriter(writer=writer) for writer in writers]

    def after_create_session(self, session, coord) -> None:
        if self._init_ops:
            session.run(self._init_ops)

    def before_run(self, run_context):
        return None if self._pending is not None else tf.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values) -> None:
        self._drain(run_context.session)

    def _drain(self, session) -> None:
        for _ in range(session.run(self._pending) if self._pending is not None else 0):
            session.run(self._fetches)

    def end(self, session) -> None:
        self._drain(session)  # the steps of a loop the input ended
        if self._flush_ops:
            session.run(self._flush_ops)


def _call_host_fn(host_call) -> Any:
    fn, tensors = host_call
    return fn(**tensors) if isinstance(tensors, dict) else fn(*tensors)


def _to_estimator_spec(spec: Any, mode: str, summary_dir: str, pending=None):
    """An ``EstimatorSpec`` for the model_fn's spec; ``host_call`` writes to ``summary_dir``."""
    if not isinstance(spec, _TPU_SPEC_TYPES):
        return spec
    eval_metric_ops, extra = None, ()
    if spec.eval_metrics is not None and mode == _MODES.EVAL:
        eval_metric_ops = _call_host_fn(spec.eval_metrics)
    if spec.host_call is not None and mode != _MODES.PREDICT:
        # Under a default writer and step: CPU code's tf.summary.scalar writes nothing without.
        previous_step = tf2.summary.experimental.get_step()
        tf2.summary.experimental.set_step(tf.train.get_or_create_global_step())
        try:
            writer = tf2.summary.create_file_writer(summary_dir)
            with writer.as_default(), tf2.summary.record_if(True):
                extra = (_HostCallHook(_call_host_fn(spec.host_call), pending),)
        finally:
            tf2.summary.experimental.set_step(previous_step)
    scaffold = spec.scaffold_fn() if spec.scaffold_fn else None  # not :=, which autograph loses
    if scaffold is None and spec.scaffold_fn:
        tf.logging.warning(_ON_A_TPU.format("scaffold_fn returned None", "return a Scaffold()"))
    flat = tf.nest.flatten(spec.host_call[1]) if spec.host_call else []
    if any(isinstance(t, tf.Tensor) and t.shape.rank == 0 for t in flat):
        tf.logging.warning(_ON_A_TPU.format("a host_call tensor is a scalar", "tf.reshape(t, [1])"))
    shared = {k: getattr(spec, k) for k in ("predictions", "loss", "train_op", "export_outputs")}
    return tf.estimator.EstimatorSpec(
        mode=mode,
        **shared,
        eval_metric_ops=eval_metric_ops,
        scaffold=scaffold,
        training_hooks=tuple(spec.training_hooks or ()) + extra,
        evaluation_hooks=tuple(spec.evaluation_hooks or ()) + extra,
        prediction_hooks=tuple(spec.prediction_hooks or ()),
    )


def _wants_official(use_tpu, config) -> bool:
    if not use_tpu:
        return False
    cluster = getattr(config, "cluster", None)
    if cluster is not None and not isinstance(cluster, NoTPUClusterResolver):
        return True  # an official resolver exists only once the TPU resolved
    master = getattr(config, "master", "") or ""
    # In a TF_CONFIG cluster RunConfig's master is this task's own server, not a TPU.
    if cluster is None and master.startswith("grpc://") and "TF_CONFIG" not in os.environ:
        return tpu_available(master)
    return tpu_available()


def _replicas(config, mode: str) -> int:  # sharing one step's batch
    strategies = {_MODES.TRAIN: config.train_distribute, _MODES.EVAL: config.eval_distribute}
    return strategies[mode].num_replicas_in_sync if strategies.get(mode) is not None else 1


class TPUEstimator(tf.estimator.Estimator):
    """``TPUEstimator`` with the official signature that runs everywhere.

    The official class when ``use_tpu`` is True or ``"auto"`` and a TPU is reachable (local,
    ``RunConfig(cluster=…)``, a ``grpc://`` master, ``TPU_NAME``). Otherwise an Estimator whose
    model_fn gets ``params['batch_size']`` (per replica under a strategy) and ``params['use_tpu']
    = False``, may return a ``TPUEstimatorSpec``, and logs ``loss = …, step = …; examples/sec: …``
    every ``log_step_count_steps`` (not beside a ``hooks.ProgressHook``); a ``Session.run``
    trains ``TPUConfig.iterations_per_loop`` steps, as on a TPU (see :meth:`train`).

    Args:
      model_fn: ``model_fn(features, labels, mode, params, config)`` returning a
        ``TPUEstimatorSpec`` or ``EstimatorSpec``.
      model_dir, config, params, warm_start_from: as for ``Estimator`` (``config`` a
        ``tpu.RunConfig``; off a TPU a plain ``RunConfig`` too).
      use_tpu: True, False or ``"auto"``.
      train_batch_size, eval_batch_size, predict_batch_size: global batch size of each mode.
      batch_axis, eval_on_tpu, embedding_config_spec, export_saved_model_api_version,
        export_to_tpu, export_to_cpu: for the official class (off a TPU: a CPU SavedModel).

    Raises:
      ValueError: reserved ``params`` keys, a bad batch size or one the replicas of a
        distribution strategy cannot share.

    Example:

        est = tpu.TPUEstimator(model_fn, config=tpu.RunConfig(model_dir="/tmp/run"),
                               use_tpu="auto", train_batch_size=32, eval_batch_size=32)
        est.train(input_fn, max_steps=1000)   # logs "loss = …, step = …" on CPU/GPU too
    """

    def __new__(
        cls, model_fn=None, model_dir=None, config=None, params=None, use_tpu=True, *a, **kw
    ):
        if isinstance(use_tpu, str) and use_tpu != "auto":  # "False" (a flag's) is truthy
            raise ValueError(f"`use_tpu` must be True, False or 'auto'. Got: {use_tpu!r}")
        if cls is TPUEstimator and _wants_official(use_tpu, config):
            _state["official_estimator_built"] = True  # CrossShardOptimizer wraps from now on
            tf.logging.info("TPU found: using the official tf.estimator.tpu.TPUEstimator.")
            config = RunConfig() if config is None else config
            official = tf.estimator.tpu.TPUEstimator
            return official(model_fn, model_dir, config, params, True, *a, **kw)
        return super().__new__(cls)

    def __init__(
        self,
        model_fn: Optional[Callable] = None,
        model_dir: Optional[str] = None,
        config: Optional[tf.estimator.RunConfig] = None,
        params: Optional[dict] = None,
        use_tpu: Union[bool, str] = True,
        train_batch_size: Optional[int] = None,
        eval_batch_size: Optional[int] = None,
        predict_batch_size: Optional[int] = None,
        batch_axis: Any = None,
        eval_on_tpu: bool = True,
        export_to_tpu: bool = True,
        export_to_cpu: bool = True,
        warm_start_from: Any = None,
        embedding_config_spec: Any = None,
        export_saved_model_api_version: Any = 1,
    ) -> None:
        model_fn_args(model_fn)
        config = RunConfig() if config is None else config
        if params is not None and not hasattr(params, "keys"):  # what dict() takes
            raise TypeError(f"`params` must be a dict (of flags: vars(args)). Got: {params!r:.80}")
        if any(key in (params or {}) for key in _RESERVED_PARAMS_KEYS):
            raise ValueError(
                f"`params` must not hold the reserved keys {list(_RESERVED_PARAMS_KEYS)}: pass "
                f"batch sizes as train_batch_size / eval_batch_size. Got: {sorted(params)}"
            )
        sizes = (train_batch_size, eval_batch_size, predict_batch_size)
        self._batch_sizes = {
            mode: check_int(name, size, allow_none=True)
            for (mode, name), size in zip(_BATCH_ARG.items(), sizes)
        }
        if use_tpu is True and not _state.get("said_no_tpu"):
            _state["said_no_tpu"] = True
            tf.logging.warning("No TPU found: TPUEstimator runs as an Estimator on CPU/GPU.")
        if config.master and "TF_CONFIG" not in os.environ:
            # The master is the TPU that did not resolve; a session on it would hang.
            config = copy.copy(config)
            config._master = config._evaluation_master = ""  # RunConfig.replace refuses them
        if config.session_config is None and config.cluster_spec and "TF_CONFIG" in os.environ:
            # tpu.RunConfig leaves out the between-graph device filters: without them the
            # chief's final predict hung on a worker that had exited.
            config = config.replace(session_config=session_config())
        # Every log_step_count_steps (crossed at a loop's end), not every iterations_per_loop.
        self._log_every = config.log_step_count_steps or None
        # TPUConfig.iterations_per_loop when training loops; _looping: it did.
        self._loop = loop_length(config) if _state["loops"] else None
        for mode, batch_size in self._batch_sizes.items():
            replicas = _replicas(config, mode)
            if batch_size is not None and batch_size % replicas:
                raise ValueError(
                    f"`{_BATCH_ARG[mode]}` must be a multiple of the {replicas} replicas of the "
                    f"distribution strategy. Got: {batch_size}"
                )
        self._user_model_fn = model_fn
        self._train_until = (None, None)  # train()'s max_steps, steps
        self._input_graphs = weakref.WeakSet()  # the graphs input_fn ran in; others: an export
        config = config.replace(log_step_count_steps=None)  # ours replaces Estimator's two hooks
        params = dict(params or {})
        super().__init__(self._make_model_fn(), model_dir, config, params, warm_start_from)

    def _assert_members_are_not_overridden(self) -> None:
        pass  # Estimator lets only a class named TPUEstimator override train; subclasses may

    @property
    def train_batch_size(self) -> Optional[int]:
        """The global training batch size given, or None."""
        return self._batch_sizes[_MODES.TRAIN]

    def _replica_batch_size(self, mode: str) -> Optional[int]:  # each core's share, as on TPU
        batch_size = self._batch_sizes[mode]
        return batch_size // _replicas(self._config, mode) if batch_size is not None else None

    def _make_model_fn(self) -> Callable:
        def model_fn(features, labels, mode, params, config):
            tf.logging.info("Running %s on CPU", mode)  # TF 1.15's line off a TPU
            # As in the official class: input_fn runs before model_fn, except in an export.
            is_export = tf.get_default_graph() not in self._input_graphs
            params = dict(params, use_tpu=False)  # a model_fn believing it would build TPU ops
            if not is_export and self._batch_sizes.get(mode) is not None:
                params["batch_size"] = self._replica_batch_size(mode)
            args = dict(mode=mode, params=params, config=config)

            def step(features, labels):
                try:
                    return call_model_fn(
                        self._user_model_fn, features=features, labels=labels, **args
                    )
                except KeyError as e:  # as for an input_fn: why it is unset
                    if "batch_size" in params or e.args != ("batch_size",):
                        raise
                    why = f"for {mode}: pass {_BATCH_ARG[mode]}= to TPUEstimator"
                    why = "in an export, as on a TPU: use tf.shape(...)[0]" if is_export else why
                    raise ValueError(f"model_fn reads params['batch_size'], unset {why}") from e

            looped = None
            if mode == _MODES.TRAIN and self._loop and not is_export:
                every = (self._log_every, config.save_checkpoints_steps)
                looped = training_loop(step, features, labels, self._loop, self._train_until, every)
                self._looping = looped is not None
            spec, pending = looped or (step(features, labels), None)
            eval_dir = os.path.join(config.model_dir or "", "eval")
            summary_dir = eval_dir if mode == _MODES.EVAL else config.model_dir or ""
            spec = _to_estimator_spec(spec, mode, summary_dir, pending)
            if not isinstance(spec, tf.estimator.EstimatorSpec):
                return spec  # Estimator's error names what it needs
            if mode == _MODES.TRAIN and config.train_distribute is None:
                spec = with_loss_line(spec, config, self._log_every, self._train_until, self)
            saver = check_model_dir(config.model_dir, spec.scaffold, mode=mode)
            if saver is not None and mode == _MODES.PREDICT:  # an export restores with it
                spec = spec._replace(scaffold=with_saver(spec.scaffold, saver))
            return spec

        return model_fn

    def _train_with_estimator_spec(
        self, estimator_spec, worker_hooks, hooks, global_step_tensor, saving_listeners
    ):
        # The one place that knows the spec (with a strategy: all replicas') and every hook.
        config, run_hooks = self._config, tuple(worker_hooks) + tuple(hooks)
        steps_per_run = self._loop if self._looping else 1
        if config.train_distribute is not None:  # (without one: in model_fn)
            steps_per_run = None  # Estimator's own checkpoint saver
            estimator_spec = with_loss_line(
                estimator_spec, config, self._log_every, self._train_until, self
            )
        estimator_spec = with_run_hooks(estimator_spec, config, run_hooks, steps_per_run)
        return super()._train_with_estimator_spec(
            estimator_spec, worker_hooks, hooks, global_step_tensor, saving_listeners
        )

    def _call_input_fn(self, input_fn, mode, input_context=None):
        # Estimator calls this from outside train/evaluate/predict too (InMemoryEvaluatorHook).
        self._input_graphs.add(tf.get_default_graph())
        params = self.params  # a copy
        if (batch_size := self._replica_batch_size(mode)) is not None:  # (official: left out)
            params["batch_size"] = batch_size
        args = dict(mode=mode, params=params, config=self.config, input_context=input_context)
        try:
            with tf.device("/cpu:0"):
                return call_with_args(input_fn, **args)
        except KeyError as e:
            if batch_size is not None or e.args != ("batch_size",):
                raise
            fix = f"{mode}: pass {_BATCH_ARG[mode]}= to TPUEstimator"
            raise ValueError(f"input_fn reads params['batch_size'], unset for {fix}") from e

    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """As ``Estimator.train``, guarding model_dir (one writer, an intact checkpoint).

        With ``TPUConfig(iterations_per_loop=N)`` (default 2) a ``Session.run`` trains N steps,
        as on a TPU: hooks run once per loop and may fetch only the loss and the global step."""
        self._train_until, self._looping = (max_steps, steps), False  # for the loss line (model_fn)
        looped = lambda: self._looping and self._loop  # noqa: E731
        one_step = "TPUConfig(iterations_per_loop=1)"
        with fetch_errors(looped, one_step), guarded_train(self, hooks, max_steps, steps) as hooks:
            return super().train(input_fn, hooks, steps, max_steps, saving_listeners)

    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None) -> dict:
        """As ``Estimator.evaluate``; a ValueError for an input that never ends or is empty."""
        hooks = guarded_eval_hooks(self.config, hooks, steps)
        checkpoint_path = usable_checkpoint(self.model_dir, "evaluate()", checkpoint_path)
        with label_errors(), read_errors():
            return super().evaluate(input_fn, steps, hooks, checkpoint_path, name)

    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None, **kw):
        """As ``Estimator.predict``, from the checkpoint :meth:`latest_checkpoint` finds."""
        checkpoint_path = usable_checkpoint(self.model_dir, "predict()", checkpoint_path)
        hooks = [*(hooks or ()), EndlessPredictWarning()]
        return super().predict(input_fn, predict_keys, hooks, checkpoint_path, **kw)

    def latest_checkpoint(self) -> Optional[str]:
        """The state file's checkpoint if intact, else the newest intact one (with a warning)."""
        return usable_checkpoint(self.model_dir, "an export")
