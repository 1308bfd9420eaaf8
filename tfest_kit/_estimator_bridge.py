"""Supplies what tensorflow-estimator 2.15 imports and TensorFlow >= 2.16 no longer has.

``_tf.py`` calls :func:`install` between ``import tensorflow`` and ``import tensorflow_estimator``
(a no-op on TF 2.15), then :func:`restore_estimator_namespace`. ``SUPPLIED`` lists each name, all
TF 2.15's (the distribute-coordinator glue keeps ``RunConfig(train_distribute=…)`` working under
``TF_CONFIG``); nothing on disk changes. ``tests/test_estimator_bridge.py`` checks each.
"""

import copy
import functools
import importlib
import importlib.util
import sys
import types
from typing import Any

from tfest_kit.cli.doctor import _release

import tensorflow as tf
from tensorflow.python import distribute, tpu
from tensorflow.python.distribute import distribute_coordinator as dc
from tensorflow.python.distribute import distribute_coordinator_context as dc_context
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.util import tf_export

_DISTRIBUTE = "tensorflow.python.distribute.estimator_training"
_SESSION_SUPPORT = "tensorflow.python.tpu.session_support"
_EMBEDDING = "tensorflow.python.tpu.tpu_embedding"
_EMBEDDING_GRADIENT = "tensorflow.python.tpu.tpu_embedding_gradient"
_EMBEDDING_PARAMETERS = tuple(
    """AdagradParameters AdamParameters FtrlParameters MomentumParameters ProximalAdagradParameters
    RMSPropParameters StochasticGradientDescentParameters""".split()
)
_DISTRIBUTE_FUNCTIONS = ("init_run_config", "should_run_distribute_coordinator")
_DISTRIBUTE_FUNCTIONS += ("train_and_evaluate", "estimator_train", "estimator_evaluate")

_log = tf.compat.v1.logging

# "module" is a module the bridge creates; "module:name" an attribute it sets on a TF module.
SUPPLIED: dict[str, str] = {
    _DISTRIBUTE: ", ".join(_DISTRIBUTE_FUNCTIONS),
    _SESSION_SUPPORT: "GracefulShutdownHook and its finalizers (a warning), start_worker_watchdog",
    _EMBEDDING: "the seven *Parameters classes; any use is a clear error",
    _EMBEDDING_GRADIENT: "any use is a clear error",
    "tensorflow.python.util.tf_export:ESTIMATOR_API_NAME": "'estimator', with API_ATTRS entries",
    "tensorflow.compat.v1.tpu:experimental.AdagradParameters": "and the six other *Parameters",
    "tensorflow:estimator": "tensorflow_estimator's api._v2.estimator",
    "tensorflow.compat.v1:estimator": "tensorflow_estimator's api._v1.estimator",
    "tensorflow.compat.v2:estimator": "tensorflow_estimator's api._v2.estimator",
}


def needed(version: str) -> bool:
    """Whether TensorFlow ``version`` lacks what tensorflow-estimator 2.15 imports (>= 2.16)."""
    return _release(version)[:2] >= (2, 16)


def _global_id(config: Any) -> int:
    """The task's index over chief, the other jobs sorted by name, then ps (TF 2.15's order)."""
    cluster_spec, task_type = config._cluster_spec, config._task_type
    if not task_type:
        return 0
    first = 0
    for job in sorted(cluster_spec.jobs, key=lambda job: (job != "chief", job == "ps", job)):
        if job == task_type:
            return first + config._task_id
        first += len(cluster_spec.job_tasks(job))
    raise RuntimeError(f"task_type {task_type!r} is not in the cluster {cluster_spec}.")


def _local_estimator(estimator: Any, field: str, strategy: Any) -> tuple[Any, Any]:
    """A copy of ``estimator`` for this worker, its config set from the coordinator's context."""
    local = copy.deepcopy(estimator)
    config, context = local._config, dc_context.get_current_worker_context()
    setattr(config, f"_{field}_distribute", strategy)
    # RunConfig's fields, set as TF 2.15's estimator_training set them for each worker.
    config._service, config._cluster_spec = None, context.cluster_spec
    config._task_type, config._task_id = context.task_type, context.task_id
    config._evaluation_master = config._master = context.master_target
    config._is_chief = context.is_chief
    if not config._cluster_spec:
        config._global_id_in_cluster, config._num_ps_replicas, config._num_worker_replicas = 0, 0, 1
    elif config._task_type != "evaluator":
        jobs = config._cluster_spec.as_dict()
        config._num_ps_replicas = len(jobs.get("ps", []))
        config._num_worker_replicas = len(jobs.get("worker", [])) + len(jobs.get("chief", []))
        config._global_id_in_cluster = _global_id(config)
    else:
        config._cluster_spec = tf.train.ClusterSpec({})
        config._num_ps_replicas = config._num_worker_replicas = 0
        config._global_id_in_cluster = None
    _log.info("Updated config: %s", vars(config))
    setattr(local, f"_{field}_distribution", strategy)
    return local, context


def init_run_config(config: Any, tf_config: dict) -> None:
    """Sets a ``RunConfig``'s distribute-coordinator mode from ``TF_CONFIG`` (TF 2.15's rules)."""
    experimental = config._experimental_distribute
    for field in ("train_distribute", "eval_distribute"):
        given = getattr(experimental, field) if experimental else None
        if given and getattr(config, "_" + field):
            raise ValueError(f"Either `{field}` or `experimental_distribute.{field}` can be set.")
        if given:
            setattr(config, "_" + field, given)
    cluster_spec = tf.train.ClusterSpec(tf_config.get("cluster", {}))
    config._init_distributed_setting_from_environment_var({})
    if config._train_distribute and experimental and experimental.remote_cluster:
        if cluster_spec:
            raise ValueError(
                'Cannot set both "cluster_spec" of TF_CONFIG and '
                "`experimental_distribute.remote_cluster`"
            )
        config._distribute_coordinator_mode = dc.CoordinatorMode.STANDALONE_CLIENT
        config._cluster_spec = experimental.remote_cluster
        _log.info("RunConfig initialized for Distribute Coordinator with STANDALONE_CLIENT mode")
        return
    if not cluster_spec or "master" in cluster_spec.jobs or not config._train_distribute:
        config._distribute_coordinator_mode = None
        config._init_distributed_setting_from_environment_var(tf_config)
        config._maybe_overwrite_session_config_for_distributed_training()
        _log.info("Not using Distribute Coordinator.")
        return
    config._cluster_spec = cluster_spec
    config._distribute_coordinator_mode = dc.CoordinatorMode.INDEPENDENT_WORKER
    _log.info("RunConfig initialized for Distribute Coordinator with INDEPENDENT_WORKER mode")


def should_run_distribute_coordinator(config: Any) -> bool:
    """Whether ``Estimator`` should hand training to the distribute coordinator."""
    if (mode := getattr(config, "_distribute_coordinator_mode", None)) is None:
        _log.info("Not using Distribute Coordinator.")
        return False
    if mode not in (dc.CoordinatorMode.STANDALONE_CLIENT, dc.CoordinatorMode.INDEPENDENT_WORKER):
        _log.warning("Unexpected distribute_coordinator_mode: %r", mode)
        return False
    if not config.cluster_spec:
        _log.warning(
            "Running `train_and_evaluate` locally, ignoring "
            "`experimental_distribute_coordinator_mode`."
        )
        return False
    return True


def train_and_evaluate(estimator: Any, train_spec: Any, eval_spec: Any, executor_cls: Any) -> None:
    """Runs ``train_and_evaluate`` through the distribute coordinator (TF 2.15's behaviour)."""
    run_config = estimator.config
    if not (mode := run_config._distribute_coordinator_mode):
        raise ValueError("Distribute coordinator mode is not specified in `RunConfig`.")

    def worker_fn(strategy: Any) -> None:
        local, context = _local_estimator(estimator, "train", strategy)
        independent = mode == dc.CoordinatorMode.INDEPENDENT_WORKER
        hooks = list(train_spec.hooks) if independent or context.is_chief else []
        local._config._distribute_coordinator_mode = None
        local.train(input_fn=train_spec.input_fn, max_steps=train_spec.max_steps, hooks=hooks)

    def eval_fn(strategy: Any) -> None:
        local, _ = _local_estimator(estimator, "eval", strategy)
        local._config._distribute_coordinator_mode = None
        executor_cls(local, train_spec, eval_spec)._start_continuous_evaluation()

    cluster_spec = run_config.cluster_spec if mode == dc.CoordinatorMode.STANDALONE_CLIENT else None
    options = dict(mode=mode, cluster_spec=cluster_spec, session_config=run_config.session_config)
    dc.run_distribute_coordinator(
        worker_fn, run_config.train_distribute, eval_fn, run_config.eval_distribute, **options
    )


def _run_standalone(estimator: Any, run_fn: Any, hooks: Any, *, field: str, method: str) -> Any:
    """``Estimator.train`` / ``evaluate`` through the coordinator, STANDALONE_CLIENT mode only."""
    config = estimator._config
    cluster_spec = multi_worker_util.normalize_cluster_spec(config.cluster_spec)
    strategy, mode = getattr(config, f"_{field}_distribute"), config._distribute_coordinator_mode
    if "evaluator" in cluster_spec.jobs:
        raise ValueError("'evaluator' job is not supported if you don't use `train_and_evaluate`")
    if mode != dc.CoordinatorMode.STANDALONE_CLIENT:
        raise ValueError(
            f"Only `STANDALONE_CLIENT` mode is supported when you call `Estimator.{method}`"
        )
    if strategy.extended.experimental_between_graph:
        raise ValueError(
            f"`Estimator.{method}` API is not supported for {type(strategy).__name__} with "
            "`STANDALONE_CLIENT` mode."
        )

    def worker_fn(worker_strategy: Any) -> Any:
        local, context = _local_estimator(estimator, field, worker_strategy)
        result = run_fn(local, worker_strategy, hooks if context.is_chief else [])
        return local if field == "train" else result

    options = dict(mode=mode, cluster_spec=cluster_spec, session_config=config.session_config)
    return dc.run_distribute_coordinator(worker_fn, strategy, **options)


estimator_train = functools.partial(_run_standalone, field="train", method="train")
estimator_evaluate = functools.partial(_run_standalone, field="eval", method="evaluate")


def _no_tpu_embedding(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError(
        "TPU embeddings (TPUEstimator's embedding_config_spec, tf.estimator.tpu.experimental."
        "*Parameters) need a TPU and TensorFlow 2.15: TensorFlow 2.16 removed "
        "tensorflow.python.tpu.tpu_embedding. Use the TensorFlow 2.15 stack "
        "(make setup STACK=2.15), or a tf.feature_column embedding column off the TPU."
    )


def _embedding_module(name: str, classes: tuple[str, ...]) -> types.ModuleType:
    def _embedding_attribute(attribute: str) -> Any:
        if attribute.startswith("__"):  # the import system's own probes (__path__ …)
            raise AttributeError(attribute)
        return _no_tpu_embedding()

    module = types.ModuleType(name, "Supplied by tfest_kit: TPU embeddings need TF 2.15.")
    for class_name in classes:
        setattr(module, class_name, type(class_name, (), {"__init__": _no_tpu_embedding}))
    module.__getattr__ = _embedding_attribute
    return module


def _session_support_module() -> types.ModuleType:
    def unavailable(*args: Any, **kwargs: Any) -> None:
        _log.warning(
            "Graceful TPU shutdown and the TPU worker watchdog are not available on this "
            "TensorFlow (tensorflow.python.tpu.session_support was removed in 2.16); a preempted "
            "TPU job loses the steps since its last checkpoint."
        )

    class GracefulShutdownHook(tf.compat.v1.train.SessionRunHook):
        """TF 2.15's hook, without the shutdown it needs ``session_support`` for."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            unavailable()

    module = types.ModuleType(_SESSION_SUPPORT, "Supplied by tfest_kit (see _estimator_bridge).")
    module.GracefulShutdownHook, module.start_worker_watchdog = GracefulShutdownHook, unavailable
    for name in ("ResetComputation", "ShutdownLameWorkers", "ShutdownAllWorkers"):
        setattr(module, name, type(name, (), {"__call__": lambda self, *args: None}))
    return module


def install() -> None:
    """Supplies what in ``SUPPLIED`` this TensorFlow lacks; idempotent (see the module's doc)."""
    if not needed(tf.__version__):
        return
    builders = {
        _DISTRIBUTE: _distribute_module,
        _SESSION_SUPPORT: _session_support_module,
        _EMBEDDING: lambda: _embedding_module(_EMBEDDING, _EMBEDDING_PARAMETERS),
        _EMBEDDING_GRADIENT: lambda: _embedding_module(_EMBEDDING_GRADIENT, ()),
    }
    for name, build in builders.items():
        if importlib.util.find_spec(name) is not None:  # still in this TensorFlow (or supplied)
            continue
        module = sys.modules[name] = build()
        parent, _, child = name.rpartition(".")
        setattr(distribute if parent.endswith("distribute") else tpu, child, module)
    embedding, experimental = importlib.import_module(_EMBEDDING), tf.compat.v1.tpu.experimental
    for class_name in _EMBEDDING_PARAMETERS:
        if not hasattr(experimental, class_name):
            setattr(experimental, class_name, getattr(embedding, class_name))
    if not hasattr(tf_export, "ESTIMATOR_API_NAME"):
        tf_export.ESTIMATOR_API_NAME = "estimator"
        for attrs, suffix in ((tf_export.API_ATTRS, ""), (tf_export.API_ATTRS_V1, "_v1")):
            names = (f"_estimator_api_names{suffix}", f"_estimator_api_constants{suffix}")
            attrs["estimator"] = tf_export._Attributes(*names)
        tf_export.SUBPACKAGE_NAMESPACES.append("estimator")


def _distribute_module() -> types.ModuleType:
    module = types.ModuleType(_DISTRIBUTE, "Supplied by tfest_kit (_estimator_bridge).")
    module.__dict__.update({name: globals()[name] for name in _DISTRIBUTE_FUNCTIONS})
    return module


def restore_estimator_namespace() -> None:
    """Gives ``tf.estimator`` and ``tf.compat.v1/v2.estimator`` back, as TF 2.15 had them."""
    from tensorflow_estimator.python.estimator.api._v1 import estimator as v1
    from tensorflow_estimator.python.estimator.api._v2 import estimator as v2

    for namespace, module in ((tf, v2), (tf.compat.v2, v2), (tf.compat.v1, v1)):
        if getattr(namespace, "estimator", None) is None:
            namespace.estimator = module
