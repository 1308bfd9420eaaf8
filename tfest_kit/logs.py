"""Logging set-up: each line once, deprecation noise off unless asked for.

TensorFlow gives its logger a ``StreamHandler`` at import; once ``absl.app.run`` puts absl's
handler on the root logger every line prints twice. :func:`setup` gives the ``tensorflow``
logger one route to the terminal and turns deprecation warnings off with TensorFlow's own
switches and ``warnings`` filters.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Optional, Union

from tfest_kit._tf import deprecation, module_wrapper, tf2

__all__ = ["setup", "quieted", "LEVELS"]

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.FATAL,
}

# TensorFlow, Estimator and Keras all log through the one `tensorflow` logger: only the file a
# record comes from tells their INFO lines from the program's (setup(tensorflow_info=False)).
_TENSORFLOW_PACKAGES = ("tensorflow", "tensorflow_estimator", "keras", "tf_keras")


_real_path = functools.lru_cache(maxsize=None)(os.path.realpath)  # a few dozen source files


def _prints_to_terminal(handler: logging.Handler) -> bool:
    """pytest's live log, other libraries' handlers (absl, rich) and a stderr/stdout stream do."""
    if type(handler).__name__ == "_LiveLoggingStreamHandler":
        return True
    if isinstance(handler, logging.StreamHandler):
        return not isinstance(handler, logging.FileHandler) and getattr(
            handler, "stream", None
        ) in (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)
    return type(handler).__module__ != "logging.handlers"


class _OneRouteHandler(logging.Handler):
    """Sends each record to one terminal route (absl's handler, else the root's terminal
    handlers, else stderr) and to the root's other handlers (files, captures), as propagation
    would. Deciding per record keeps lines single before or after ``absl.app.run``."""

    def __init__(self, tensorflow_info: bool = True) -> None:
        super().__init__()
        self._plain = logging.StreamHandler(sys.stderr)
        self._plain.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
        self._left_out = ()
        if not tensorflow_info:
            specs = [importlib.util.find_spec(name) for name in _TENSORFLOW_PACKAGES]
            self._left_out = tuple(
                os.path.join(os.path.realpath(location), "")
                for spec in specs
                if spec
                for location in spec.submodule_search_locations or []
            )

    def emit(self, record: logging.LogRecord) -> None:
        root_handlers = [
            h for h in logging.getLogger().handlers if not isinstance(h, logging.NullHandler)
        ]
        absl_logging = sys.modules.get("absl.logging")
        absl = absl_logging.get_absl_handler() if absl_logging else None
        terminals = (
            [absl] if absl in root_handlers else list(filter(_prints_to_terminal, root_handlers))
        )
        if not terminals:
            # sys.stderr per record (captures, redirections); setStream() would flush the old,
            # perhaps closed, stream.
            self._plain.stream = sys.stderr
            terminals = [self._plain]
        elsewhere = [h for h in root_handlers if not _prints_to_terminal(h)]
        left_out = (
            self._left_out
            and record.levelno < logging.WARNING
            and _real_path(record.pathname).startswith(self._left_out)
        )
        for handler in elsewhere if left_out else terminals + elsewhere:
            if record.levelno >= handler.level:  # as propagation checks it
                handler.handle(record)


class _NoiseFilter(logging.Filter):
    """Drops three lines no level reaches without hiding lines users need (test_logs.py).

    Estimator's "model_fn includes params argument" for tfest_kit's model_fns (they take
    ``params`` for TPUEstimator); StepCounterHook's "global step has not been increased" the
    first time a value repeats (a race with the increment; a stuck step repeats again); and
    ``ReductionToOneDevice``'s "Reduce to … then broadcast to …" after its first (ten per run).
    """

    def __init__(self) -> None:
        super().__init__()
        self._last_raced: Optional[int] = None
        self._said_reduce = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        args = record.args if isinstance(record.args, tuple) else ()
        if "includes params argument" in message:
            return not any(getattr(a, "__module__", "").startswith("tfest_kit.") for a in args)
        if "has not been increased" in message:
            try:
                stale, previous = (int(a) for a in args)
            except (TypeError, ValueError):
                return True
            if stale != previous or stale == self._last_raced:
                return True
            self._last_raced = stale
            return False
        if message.startswith("Reduce to ") and "then broadcast to" in message:
            said, self._said_reduce = self._said_reduce, True
            return not said
        return True


# The same deprecations as Python warnings: Keras' legacy `tf.layers`, and tf.data's note on a
# graph-mode Dataset.options(). Keras blames the caller's module, so only the text tells them.
_DEPRECATION_WARNINGS = (
    r"`tf\.[\w.]+` is deprecated and will be removed in a future version",
    r"To make it possible to preserve tf\.data options",
)


def _set_deprecation_warnings(show: bool) -> None:
    logger = tf2.get_logger()
    if not any(isinstance(f, _NoiseFilter) for f in logger.filters):
        logger.addFilter(_NoiseFilter())
    # What deprecation.silence() sets, for @deprecated and tf.compat.v1 names (_tf.PRIVATE_NAMES).
    deprecation._PRINT_DEPRECATION_WARNINGS = show
    module_wrapper._PER_MODULE_WARNING_LIMIT = 1 if show else 0
    for message in _DEPRECATION_WARNINGS:
        warnings.filterwarnings("default" if show else "ignore", message, UserWarning)


def _level(verbosity: Union[str, int, None]) -> int:
    if isinstance(verbosity, str) and verbosity.lower() in LEVELS:
        return LEVELS[verbosity.lower()]
    if isinstance(verbosity, int) and not isinstance(verbosity, bool):
        return verbosity
    if verbosity is not None:
        raise ValueError(
            f"`verbosity` must be one of {sorted(LEVELS)} or a logging level number. "
            f"Got: {verbosity!r}"
        )
    absl_flags = sys.modules.get("absl.flags")  # absl's --verbosity, when the command line gave it
    if absl_flags and "verbosity" in absl_flags.FLAGS and absl_flags.FLAGS.is_parsed():
        flag = absl_flags.FLAGS["verbosity"]
        if flag.present:
            from absl.logging import converter

            return converter.absl_to_standard(flag.value)
    return logging.INFO


def setup(
    verbosity: Union[str, int, None] = None,
    show_deprecations: bool = False,
    tensorflow_info: bool = True,
) -> logging.Logger:
    """Configures TensorFlow's logger so that each line is printed once.

    Safe to call repeatedly, before or after ``absl.app.run``. TensorFlow's ``StreamHandler``
    is replaced; a program's own handlers, and the root logger's (``basicConfig(filename=…)``),
    still get every line.

    Args:
      verbosity: a name of ``LEVELS`` or a ``logging`` level; None: absl's ``--verbosity`` flag
        when given, else ``"info"``.
      show_deprecations: print TensorFlow's and Keras' (``tf.layers``) deprecation warnings.
      tensorflow_info: print the INFO lines of TensorFlow, Estimator and Keras; with False the
        terminal keeps tfest_kit's, the program's and every warning.

    Returns:
      The ``tensorflow`` logger.

    Raises:
      ValueError: if ``verbosity`` is not a name of ``LEVELS`` or an int.

    Example:

        logs.setup(tensorflow_info=False)  # ProgressHook's lines, not Estimator's
    """
    level = _level(verbosity)
    logger = tf2.get_logger()
    for handler in list(logger.handlers):
        if type(handler) is logging.StreamHandler or isinstance(handler, _OneRouteHandler):
            logger.removeHandler(handler)
    logger.addHandler(_OneRouteHandler(tensorflow_info))
    logger.propagate = False
    logger.setLevel(level)
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
    previous = logger.level
    logger.setLevel(max(level, previous))
    try:
        yield
    finally:
        logger.setLevel(previous)


def _quiet_by_default() -> None:
    """At import: deprecation warnings off, the noise filter on; handlers left alone."""
    _set_deprecation_warnings(False)
