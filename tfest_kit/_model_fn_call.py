"""Calling a user's model_fn as Estimator would, its Keras layers seeded (tpu, model_fn), and
the classifier's check that its labels lie in ``[0, num_classes)``.

Since Keras 2.10 an unseeded initializer draws from Python's ``random``, ignoring
``tf_random_seed``; :func:`keras_seeds` reseeds only that generator while a graph is built
(``tf.keras.utils.set_random_seed`` would reseed the whole process).
"""

import contextlib
import importlib
import inspect
import random
import re
from collections.abc import Iterator
from typing import Any, Callable, Optional

from tfest_kit._tf import KERAS_PACKAGE, tf


def fn_args(fn: Callable) -> tuple:
    """Names of the arguments ``fn`` accepts (all known names if it takes ``**kwargs``)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return ("features", "labels", "mode", "params", "config", "input_context")
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in parameters if p.kind in kinds)


def call_with_args(fn: Callable, **available: Any) -> Any:
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
    """Calls ``model_fn`` with the arguments it takes, seeding Keras from ``config``."""
    if labels is not None and "labels" not in fn_args(model_fn):
        raise ValueError("model_fn does not take labels, but input_fn returns labels.")
    try:
        with keras_seeds(config.tf_random_seed):
            return call_with_args(
                model_fn, features=features, labels=labels, mode=mode, params=params, config=config
            )
    except ValueError as e:  # Estimator's spec: "Missing train_op.", no mode, no fix
        if str(e) not in ("Missing train_op.", "Missing loss.", "Missing predictions."):
            raise
        fix = "TRAIN needs loss and train_op (optimizer.minimize(loss, global_step)), EVAL loss, "
        fix += "PREDICT predictions (a dict of tensors)"
        raise ValueError(f"model_fn's spec for mode={mode!r}: {e} {fix}") from e


@contextlib.contextmanager
def keras_seeds(seed: Optional[int]) -> Iterator[None]:
    """Unseeded Keras initializers draw from ``seed`` inside; each entry restarts the sequence."""
    state = None
    if seed is not None:
        with contextlib.suppress(ImportError):  # private to Keras: no public way to set it alone
            backend = importlib.import_module(f"{KERAS_PACKAGE}.src.backend")
            state = getattr(backend, "_SEED_GENERATOR", None)
    if state is None:
        yield
        return
    previous, state.generator = getattr(state, "generator", None), random.Random(seed)
    try:
        yield
    finally:
        state.generator = previous


# The official heads say "Labels must be <= n_classes - 1" without the label, and in EVAL the
# confusion-matrix metrics fail first, naming the first three labels, not the bad one.
_ASSERTION = re.compile(
    r"assertion failed: \[(`labels` must be class ids[^\]]*)\] \[(-?\d+)\] \[to\] \[(-?\d+)\]"
)
_MESSAGE = "`labels` must be class ids in [0, {}). Got: labels from"
# The sparse softmax op's own check (Keras' sparse losses, tf.losses.sparse_softmax_*).
_OUT_OF_RANGE = re.compile(r"valid range of \[0, (\d+)\)\.\s+Label values: (-?\d+(?: -?\d+)*)")


def check_class_ids(labels, num_classes: int):
    """``labels`` as int32, failing at run time when one is outside the range."""
    labels = tf.cast(labels, tf.int32)
    in_range = tf.reduce_all((labels >= 0) & (labels < num_classes))
    low, high = tf.reduce_min(labels), tf.reduce_max(labels)
    message = _MESSAGE.format(f"num_classes={num_classes}")
    check = tf.Assert(in_range, [message, low, "to", high], name="check_labels")
    with tf.control_dependencies([check]):
        return tf.identity(labels, name="labels")


@contextlib.contextmanager
def label_errors() -> Iterator[None]:
    """Re-raises a failed :func:`check_class_ids`, not ~40 lines of op stack; others pass."""
    try:
        yield
    except tf.errors.InvalidArgumentError as e:
        match, op = _ASSERTION.search(str(e.message)), _OUT_OF_RANGE.search(str(e.message))
        if match is None and op is None:
            raise
        text, low, high = match.groups() if match else (_MESSAGE.format(op[1]), None, None)
        if op:
            low, high = min(map(int, op[2].split())), max(map(int, op[2].split()))
        raise ValueError(
            f"{text} {low} to {high}. Map the labels to class ids 0…num_classes-1 in the "
            "input_fn (or raise num_classes)."
        ) from None
