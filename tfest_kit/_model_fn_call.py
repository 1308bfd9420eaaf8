"""Calling a user's model_fn as Estimator would, its Keras layers seeded (tpu, model_fn).

Since Keras 2.10 an unseeded initializer draws from Python's ``random``, ignoring
``tf_random_seed``; :func:`keras_seeds` reseeds only that generator while a graph is built
(``tf.keras.utils.set_random_seed`` would reseed the whole process).
"""

import contextlib
import importlib
import inspect
import random
from collections.abc import Iterator
from typing import Any, Callable, Optional

from tfest_kit._tf import KERAS_PACKAGE


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
        if str(e) not in ("Missing train_op.", "Missing loss."):
            raise
        fix = "TRAIN needs loss and train_op (optimizer.minimize(loss, global_step)), EVAL loss"
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
