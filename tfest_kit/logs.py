"""Logging set-up: each line once, deprecation noise off unless asked for.

Once ``absl.app.run`` puts absl's handler on the root logger, TensorFlow's ``StreamHandler``
prints every line twice: :func:`setup` gives the ``tensorflow`` logger one route.
"""

import contextlib
import functools
import importlib.util
import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator
from typing import Union

from tfest_kit._tf import deprecation, module_wrapper, tf2

__all__ = ["setup", "quieted"]

# TensorFlow, Estimator and Keras all log through the one `tensorflow` logger: only the file a
# record comes from tells their INFO lines from the program's (setup(tensorflow_info=False)).
_TENSORFLOW_PACKAGES = ("tensorflow", "tensorflow_estimator", "keras", "tf_keras")
# The same deprecations as Python warnings: Keras' legacy `tf.layers`, and tf.data's note on a
# graph-mode Dataset.options(). Keras blames the caller's module, so only the text tells them.
_DEPRECATION_WARNINGS = (
    r"`tf\.[\w.]+` is deprecated and will be removed in a future version",
    r"To make it possible to preserve tf\.data options",
)

_real_path = functools.lru_cache(maxsize=None)(os.path.realpath)  # a few dozen source files


def _prints_to_terminal(handler: logging.Handler) -> bool:
    """pytest's live log, other libraries' handlers (absl, rich) and a stderr/stdout stream do."""
    if type(handler).__name__ == "_LiveLoggingStreamHandler":
        return True
    streams = (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)
    if isinstance(handler, logging.StreamHandler):
        return not isinstance(handler, logging.FileHandler) and handler.stream in streams
    return type(handler).__module__ != "logging.handlers"


class _OneRouteHandler(logging.Handler):
    """Sends each record to one terminal route (absl's handler, else the root's terminal
    handlers, else stderr) and to the root's other handlers (files, captures). Deciding per
    record keeps lines single before or after ``absl.app.run``."""

    def __init__(self, tensorflow_info: bool = True) -> None:
        super().__init__()
        self._plain = logging.StreamHandler(sys.stderr)
        self._plain.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
        self._left_out = ()
        if not tensorflow_info:
            specs = [s for s in map(importlib.util.find_spec, _TENSORFLOW_PACKAGES) if s]
            locations = [p for spec in specs for p in spec.submodule_search_locations or []]
            self._left_out = tuple(os.path.join(os.path.realpath(p), "") for p in locations)

    def emit(self, record: logging.LogRecord) -> None:
        roots = [h for h in logging.getLogger().handlers if not isinstance(h, logging.NullHandler)]
        absl_logging = sys.modules.get("absl.logging")
        absl = absl_logging.get_absl_handler() if absl_logging else None
        if not (terminals := [absl] if absl in roots else [*filter(_prints_to_terminal, roots)]):
            # sys.stderr per record (captures); setStream() would flush the old, maybe closed, one.
            self._plain.stream = sys.stderr
            terminals = [self._plain]
        elsewhere = [h for h in roots if not _prints_to_terminal(h)]
        low = record.levelno < logging.WARNING
        left_out = self._left_out and low and _real_path(record.pathname).startswith(self._left_out)
        for handler in elsewhere if left_out else terminals + elsewhere:
            if record.levelno >= handler.level:  # as propagation checks it
                handler.handle(record)


class _NoiseFilter(logging.Filter):
    """Drops the INFO noise matched below (tfest_kit's model_fns take ``params`` for TPUEstimator;
    an evaluator polls every 1 s), prints the RunConfig on one line and some notes once."""

    _once: set = set()  # notes said once: _ONCE's, Keras 2's per-cell RNN one (TF 1.15: once)
    _ONCE = ("Signatures EXCLUDED", "Reduce to ", "Initializing RunConfig", "Not using Distribute")
    _ONCE += ("Training logs its loss lines",)

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        args = record.args if isinstance(record.args, tuple) else ()
        if msg.startswith("Using config: %s") and args:
            record.args = (" ".join(str(args[0]).split()),)
        if msg.startswith("Waiting %f secs before starting next eval run") and args:
            return args[0] >= 10
        if msg.startswith(self._ONCE) or re.match(r"'\w+' : |`tf.nn.rnn_cell.", msg):
            said = msg in self._once
            self._once.add(msg)
            return not said
        if re.match(r"Sharding callback duration|Signatures INCLUDED .*: None$", msg):
            return False
        if "includes params argument" not in msg:
            return True
        return not any(getattr(a, "__module__", "").startswith("tfest_kit.") for a in args)


def _set_deprecation_warnings(show: bool) -> None:
    for logger in (tf2.get_logger(), logging.getLogger("absl")):
        if not any(isinstance(f, _NoiseFilter) for f in logger.filters):
            logger.addFilter(_NoiseFilter())
    # What deprecation.silence() sets, for @deprecated and tf.compat.v1 names (_tf.PRIVATE_NAMES).
    deprecation._PRINT_DEPRECATION_WARNINGS = show
    module_wrapper._PER_MODULE_WARNING_LIMIT = 1 if show else 0
    for message in _DEPRECATION_WARNINGS:
        warnings.filterwarnings("default" if show else "ignore", message, UserWarning)


def setup(
    verbosity: Union[str, int] = "info",
    show_deprecations: bool = False,
    tensorflow_info: bool = True,
) -> logging.Logger:
    """Configures TensorFlow's logger so that each line is printed once.

    Safe to call repeatedly, before or after ``absl.app.run``. TensorFlow's ``StreamHandler``
    is replaced; a program's own handlers, and the root logger's, still get every line.

    Args:
      verbosity: a ``logging`` level name (``"info"``, ``"warning"`` …) or number.
      show_deprecations: print TensorFlow's and Keras' (``tf.layers``) deprecation warnings.
      tensorflow_info: print the INFO lines of TensorFlow, Estimator and Keras; with False the
        terminal keeps tfest_kit's, the program's and every warning.

    Returns:
      The ``tensorflow`` logger.

    Raises:
      ValueError: if ``verbosity`` is no logging level.

    Example:

        logs.setup(tensorflow_info=False)  # ProgressHook's lines, not Estimator's
    """
    logger = tf2.get_logger()
    try:
        logger.setLevel(verbosity.upper() if isinstance(verbosity, str) else verbosity)
    except (TypeError, ValueError) as e:
        raise ValueError(f"`verbosity` must be a logging level. Got: {verbosity!r}") from e
    for handler in list(logger.handlers):
        if type(handler) is logging.StreamHandler or isinstance(handler, _OneRouteHandler):
            logger.removeHandler(handler)
    logger.addHandler(_OneRouteHandler(tensorflow_info))
    logger.propagate = False
    _set_deprecation_warnings(show_deprecations)
    return logger


@contextlib.contextmanager
def quieted(level: int = logging.WARNING) -> Iterator[None]:
    """Raises TensorFlow's log level to ``level`` for the ``with`` block.

    Example:

        with logs.quieted():
            est = tf.estimator.Estimator(model_fn, config=config)  # no "Using config: …"
    """
    logger = tf2.get_logger()
    logger.setLevel(max(level, previous := logger.level))
    try:
        yield
    finally:
        logger.setLevel(previous)
