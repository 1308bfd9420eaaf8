"""``TPUEstimatorSpec`` -> ``EstimatorSpec`` for the CPU/GPU fallback, and argument plumbing.

The conversion follows the official CPU path (``TPUEstimatorSpec.as_estimator_spec``) but is
written against the spec's public fields: ``as_estimator_spec`` reads the host calls from a
*class* attribute that the last constructed spec overwrote, so it cannot be trusted with a spec
that was copied or built before another one.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

from tfest_kit._keras_seeds import keras_seeds
from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._tf import tf, tf2

__all__ = [
    "fn_args",
    "call_with_args",
    "model_fn_args",
    "call_model_fn",
    "to_estimator_spec",
    "HostCallHook",
]

_TPU_SPEC_TYPES = tuple(
    c for c in tf_estimator.tpu.TPUEstimatorSpec.__mro__ if c not in (tuple, object)
)
# The v2 summary writers register their init ops in this graph collection (the official CPU
# host-call hook reads it through summary_ops_v2.summary_writer_initializer_op()).
_WRITER_INIT_COLLECTION = "_SUMMARY_WRITER_V2"


def fn_args(fn: Callable) -> tuple:
    """Names of the arguments ``fn`` accepts (all known names if it takes ``**kwargs``)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return ("features", "labels", "mode", "params", "config", "input_context")
    return tuple(
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    )


def call_with_args(fn: Callable, **available: Any) -> Any:
    """Calls ``fn`` with the subset of ``available`` keyword arguments it accepts."""
    names = fn_args(fn)
    return fn(**{k: v for k, v in available.items() if k in names})


def model_fn_args(model_fn: Any) -> tuple:
    """The arguments a user's ``model_fn`` takes, after Estimator's checks on it."""
    if not callable(model_fn):
        raise ValueError(f"`model_fn` must be a callable. Got: {model_fn!r}")
    names = fn_args(model_fn)
    if "features" not in names:
        raise ValueError(f"`model_fn` must take a `features` argument. Got: {model_fn!r}")
    return names


def call_model_fn(model_fn: Callable, *, features, labels, mode, params, config) -> Any:
    """Calls a user's ``model_fn`` from a wrapper, as Estimator would call it unwrapped.

    With the arguments it takes, after Estimator's check that it takes the labels the input
    gives; Keras layers it builds take their initial weights from ``config.tf_random_seed``.
    """
    if labels is not None and "labels" not in fn_args(model_fn):
        raise ValueError("model_fn does not take labels, but input_fn returns labels.")
    with keras_seeds(config.tf_random_seed):
        return call_with_args(
            model_fn, features=features, labels=labels, mode=mode, params=params, config=config
        )


class HostCallHook(tf.train.SessionRunHook):
    """Runs a ``host_call``'s ops every step and initialises / flushes the v2 summary writers.

    The CPU equivalent of the official ``_OutfeedHostCallHook``.
    """

    def __init__(self, fetches: Any) -> None:
        self._fetches = fetches

    def begin(self) -> None:
        self._init_ops = tf.get_collection(_WRITER_INIT_COLLECTION)
        self._flush_ops = [
            tf2.raw_ops.FlushSummaryWriter(writer=op.inputs[0]) for op in self._init_ops
        ]

    def after_create_session(self, session, coord) -> None:
        del coord
        if self._init_ops:
            session.run(self._init_ops)

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self._fetches)

    def end(self, session) -> None:
        if self._flush_ops:
            session.run(self._flush_ops)


def _call_host_fn(name: str, host_call) -> Any:
    if (
        not isinstance(host_call, (tuple, list))
        or len(host_call) != 2
        or not callable(host_call[0])
    ):
        raise ValueError(
            f"TPUEstimatorSpec.{name} must be a (function, tensors) pair with tensors a list or "
            f"a dict. Got: {host_call!r}"
        )
    fn, tensors = host_call
    if not isinstance(tensors, (dict, tuple, list)):
        raise ValueError(
            f"TPUEstimatorSpec.{name}[1] must be a list, tuple or dict. Got: {tensors!r}"
        )
    if isinstance(tensors, dict):
        _check_host_fn_keys(name, fn, tensors)
        return fn(**tensors)
    return fn(*tensors)


def _check_host_fn_keys(name: str, fn: Callable, tensors: dict) -> None:
    """Raises TypeError when ``fn`` does not take the keys of ``tensors`` as its arguments.

    TPUEstimatorSpec checks the length of a list of tensors, not the keys of a dict: the call
    failed with "got an unexpected keyword argument" from inside Estimator, naming neither the
    spec field nor what was passed.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to compare with: let the call decide
        return
    try:
        signature.bind(**tensors)
    except TypeError:
        label = getattr(fn, "__name__", type(fn).__name__)
        raise TypeError(
            f"TPUEstimatorSpec.{name} tensors must match the parameters of {label}{signature}; "
            f"rename the dict's keys to match them. Got: dict keys {sorted(tensors)}"
        ) from None


def _run_host_call(host_call, logdir: str):
    """Calls the host_call under a default summary writer on ``logdir`` and the global step.

    On a TPU the host_call usually creates its own writer; code written for CPU often relies on
    a default one (``tf.summary.scalar`` without a writer silently writes nothing). A writer
    the host_call opens itself takes precedence inside it.
    """
    writer = tf2.summary.create_file_writer(logdir)
    previous_step = tf2.summary.experimental.get_step()
    tf2.summary.experimental.set_step(tf.train.get_or_create_global_step())
    try:
        with writer.as_default(), tf2.summary.record_if(True):
            return _call_host_fn("host_call", host_call)
    finally:
        tf2.summary.experimental.set_step(previous_step)


def to_estimator_spec(spec: Any, mode: str, summary_dir: Optional[str]):
    """Returns an ``EstimatorSpec`` for ``spec`` (a ``TPUEstimatorSpec`` or ``EstimatorSpec``).

    Args:
      spec: what the user's model_fn returned.
      mode: the ``tf.estimator.ModeKeys`` the model_fn was called for.
      summary_dir: where a host_call's default summary writer writes (Estimator's
        ``model_dir`` for TRAIN, its ``eval_dir(name)`` for EVAL).

    Returns:
      A ``tf.estimator.EstimatorSpec``.

    Raises:
      TypeError: if ``spec`` is neither, or the keys of a dict of ``eval_metrics`` /
        ``host_call`` tensors do not match their function's parameters.
    """
    if isinstance(spec, tf_estimator.EstimatorSpec):
        return spec
    if not isinstance(spec, _TPU_SPEC_TYPES):
        raise TypeError(
            "model_fn must return a tf.estimator.EstimatorSpec or a "
            f"tf.compat.v1.estimator.tpu.TPUEstimatorSpec. Got: {type(spec).__name__}"
        )
    eval_metric_ops = None
    if spec.eval_metrics is not None and mode == tf_estimator.ModeKeys.EVAL:
        eval_metric_ops = _call_host_fn("eval_metrics", spec.eval_metrics)
    extra_hooks = ()
    if spec.host_call is not None and mode != tf_estimator.ModeKeys.PREDICT:
        # host_call works for train() and evaluate(), as documented for TPUEstimatorSpec.
        extra_hooks = (HostCallHook(_run_host_call(spec.host_call, summary_dir or "")),)
    scaffold = spec.scaffold_fn() if spec.scaffold_fn else None
    return tf_estimator.EstimatorSpec(
        mode=mode,
        predictions=spec.predictions,
        loss=spec.loss,
        train_op=spec.train_op,
        eval_metric_ops=eval_metric_ops,
        export_outputs=spec.export_outputs,
        scaffold=scaffold,
        training_hooks=tuple(spec.training_hooks or ()) + extra_hooks,
        evaluation_hooks=tuple(spec.evaluation_hooks or ()) + extra_hooks,
        prediction_hooks=tuple(spec.prediction_hooks or ()),
    )
