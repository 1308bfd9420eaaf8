"""Logging set-up: each line once, deprecation noise off unless asked for.

TensorFlow gives its ``tensorflow`` logger a ``StreamHandler`` at import when the root logger
has none; ``absl.app.run`` later puts absl's handler on the root logger, and every
``tf.compat.v1.logging.info`` line is then printed twice. :func:`setup` gives the logger one
route to the terminal: absl's handler when absl's logging is in use, the root logger's
terminal handler when it has one, else a plain one. Deprecation warnings are switched off with
TensorFlow's own switches and Python's ``warnings`` filters.

Example:

    from tfest_kit import logs

    logs.setup()                      # INFO, deprecation warnings off
    logs.setup("debug", show_deprecations=True)
    logs.setup(tensorflow_info=False)  # your INFO lines and tfest_kit's, not TensorFlow's
"""

from __future__ import annotations

import contextlib
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

_FORMAT = "%(levelname)s:%(name)s:%(message)s"

# TensorFlow, Estimator and Keras all log through the one ``tensorflow`` logger, so no level
# or logger setting tells their INFO lines from the program's: the file a record comes from
# does (``setup(tensorflow_info=False)``).
_TENSORFLOW_PACKAGES = ("tensorflow", "tensorflow_estimator", "keras", "tf_keras")


def _package_dirs(names: tuple[str, ...]) -> tuple[str, ...]:
    specs = [importlib.util.find_spec(name) for name in names]
    return tuple(
        os.path.join(os.path.realpath(location), "")
        for spec in specs
        if spec
        for location in spec.submodule_search_locations or []
    )


def _absl_handler() -> logging.Handler | None:
    """absl's handler, if absl's logging is attached to the root logger."""
    absl_logging = sys.modules.get("absl.logging")
    handler = absl_logging.get_absl_handler() if absl_logging else None
    return handler if handler in logging.getLogger().handlers else None


def _prints_to_terminal(handler: logging.Handler) -> bool:
    """Whether ``handler`` prints to the terminal: pytest's live log, other libraries' (absl's,
    rich's) and a ``StreamHandler`` on stderr or stdout do; files, buffers, queues do not."""
    if isinstance(handler, logging.NullHandler):
        return False
    if type(handler).__name__ == "_LiveLoggingStreamHandler":  # pytest --log-cli-level
        return True
    if isinstance(handler, logging.StreamHandler):
        return not isinstance(handler, logging.FileHandler) and getattr(
            handler, "stream", None
        ) in (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)
    return type(handler).__module__ != "logging.handlers"


class _OneRouteHandler(logging.Handler):
    """Sends each ``tensorflow`` record to one terminal handler and to the root's other ones.

    The terminal is absl's handler when absl is active, else the root logger's terminal
    handlers, else a plain one on stderr; the root's handlers that write elsewhere (a
    ``FileHandler`` of ``basicConfig(filename=…)``, a test's capture) get every record, as
    propagation would have given it. Deciding per record keeps lines single whether
    ``setup()`` runs before or after ``absl.app.run`` installs its handler.
    """

    def __init__(self, tensorflow_info: bool = True) -> None:
        super().__init__()
        self._plain = logging.StreamHandler(sys.stderr)
        self._plain.setFormatter(logging.Formatter(_FORMAT))
        self._left_out = () if tensorflow_info else _package_dirs(_TENSORFLOW_PACKAGES)
        self._is_left_out: dict[str, bool] = {}  # by source file: a few dozen at most

    def _leaves_out(self, record: logging.LogRecord) -> bool:
        """Whether the terminal leaves ``record`` out (TensorFlow's INFO, tensorflow_info off)."""
        if record.levelno >= logging.WARNING or not self._left_out:
            return False
        if record.pathname not in self._is_left_out:
            path = os.path.realpath(record.pathname)
            self._is_left_out[record.pathname] = path.startswith(self._left_out)
        return self._is_left_out[record.pathname]

    def emit(self, record: logging.LogRecord) -> None:
        root_handlers = logging.getLogger().handlers
        absl = _absl_handler()
        terminals = [absl] if absl else [h for h in root_handlers if _prints_to_terminal(h)]
        if not terminals:
            # sys.stderr per record, for pytest's capture and redirections; not setStream(),
            # which flushes the old stream, perhaps closed by now.
            self._plain.stream = sys.stderr
            terminals = [self._plain]
        elsewhere = [
            h
            for h in root_handlers
            if not _prints_to_terminal(h) and not isinstance(h, logging.NullHandler)
        ]
        for handler in elsewhere if self._leaves_out(record) else terminals + elsewhere:
            if record.levelno >= handler.level:  # as propagation checks it
                handler.handle(record)


# Three lines no setting reaches: each is logged at a level that also carries lines the user
# needs (tests/test_logs.py shows the official level lets them through), so they are told apart
# by their text.


class _OwnModelFnParamsFilter(logging.Filter):
    """Drops Estimator's WARNING "model_fn (…) includes params argument" for tfest_kit's
    model_fns, which take ``params`` for TPUEstimator's batch size and work without it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "includes params argument" not in str(record.msg):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(getattr(a, "__module__", "").startswith("tfest_kit.") for a in args)


class _RacedGlobalStepFilter(logging.Filter):
    """Drops StepCounterHook's WARNING "global step has not been increased" when it is a race.

    The hook reads the step in the same run as the train op, unordered with a v1 optimizer's
    (or Keras') increment, so two runs may read one value. A race reads a value twice once; a
    model_fn that never increments the step reads it again and again: the first report of a
    value is dropped, the next passes (a later run may race at the same step again).
    """

    def __init__(self) -> None:
        super().__init__()
        self._last_dropped: Optional[int] = None

    def filter(self, record: logging.LogRecord) -> bool:
        if "has not been increased" not in str(record.msg):
            return True
        try:
            stale, previous = (int(a) for a in record.args)
        except (TypeError, ValueError):
            return True
        if stale != previous or stale == self._last_dropped:
            return True
        self._last_dropped = stale
        return False


class _RepeatedReduceLineFilter(logging.Filter):
    """Passes MirroredStrategy's INFO "Reduce to … then broadcast to …" once per process.

    ``ReductionToOneDevice`` (``run_config(cpu_replicas=…)``) logs it with ``log_first_n(…,
    10)``: ten identical lines, three per training graph.
    """

    def __init__(self) -> None:
        super().__init__()
        self._said = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if not (message.startswith("Reduce to ") and "then broadcast to" in message):
            return True
        said, self._said = self._said, True
        return not said


_FILTERS = (_OwnModelFnParamsFilter, _RacedGlobalStepFilter, _RepeatedReduceLineFilter)

# Python warnings of the same deprecations: Keras' legacy `tf.layers` (once per call site) and
# tf.data's note that a graph-mode Dataset.options() may be stale (a distribution strategy
# reads a training input's options). Keras attributes them to the caller's module, so only the
# message tells them apart.
_DEPRECATION_WARNINGS = (
    r"`tf\.[\w.]+` is deprecated and will be removed in a future version",
    r"To make it possible to preserve tf\.data options",
)


def _set_deprecation_warnings(show: bool) -> None:
    logger = tf2.get_logger()
    for kind in _FILTERS:
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())
    # TensorFlow's switches for @deprecated functions and tf.compat.v1 names (what
    # deprecation.silence() sets; _tf.PRIVATE_NAMES pins them).
    deprecation._PRINT_DEPRECATION_WARNINGS = show
    module_wrapper._PER_MODULE_WARNING_LIMIT = 1 if show else 0
    for message in _DEPRECATION_WARNINGS:
        warnings.filterwarnings("default" if show else "ignore", message, UserWarning)


def _absl_verbosity() -> Optional[int]:
    """The ``logging`` level of absl's ``--verbosity`` flag, if the command line gave one."""
    absl_flags = sys.modules.get("absl.flags")
    if absl_flags is None or "verbosity" not in absl_flags.FLAGS:
        return None
    flag = absl_flags.FLAGS["verbosity"]
    if not absl_flags.FLAGS.is_parsed() or not flag.present:
        return None
    from absl.logging import converter

    # absl's own rule: -1 WARNING, 0 INFO, 1 DEBUG, and each level above 1 one step below.
    if flag.value <= converter.ABSL_DEBUG:
        return converter.absl_to_standard(flag.value)
    return logging.DEBUG - (flag.value - 1)


def _level(verbosity: Union[str, int, None]) -> int:
    if verbosity is None:
        absl_level = _absl_verbosity()
        return logging.INFO if absl_level is None else absl_level
    if isinstance(verbosity, str) and verbosity.lower() in LEVELS:
        return LEVELS[verbosity.lower()]
    if isinstance(verbosity, int) and not isinstance(verbosity, bool):
        return verbosity
    raise ValueError(
        f"`verbosity` must be one of {sorted(LEVELS)} or a logging level number. "
        f"Got: {verbosity!r}"
    )


def setup(
    verbosity: Union[str, int, None] = None,
    show_deprecations: bool = False,
    tensorflow_info: bool = True,
) -> logging.Logger:
    """Configures TensorFlow's logger so that each line is printed once.

    Safe to call any number of times, before or after ``absl.app.run``. Handlers a program
    added to the ``tensorflow`` logger (a ``FileHandler`` …) stay; plain ``StreamHandler``s
    (TensorFlow's own terminal output) are replaced. The root logger's other handlers
    (``logging.basicConfig(filename=…)``) still get TensorFlow's lines.

    Args:
      verbosity: ``"debug"``, ``"info"``, ``"warning"``, ``"error"``, ``"fatal"`` or a
        ``logging`` level number. None: absl's ``--verbosity`` flag when the command line
        gives one (``app.run`` parsed it), else ``"info"``.
      show_deprecations: print TensorFlow's deprecation warnings, and Keras' for the legacy
        ``tf.layers`` (off by default: a TF1-era program otherwise prints dozens of them).
      tensorflow_info: print the INFO (and DEBUG) lines of TensorFlow, Estimator and Keras
        ("Calling model_fn.", the whole ``RunConfig``, checkpoint lines, the official loss
        lines). With ``False`` the terminal keeps tfest_kit's lines (``ProgressHook``, the
        fallback ``TPUEstimator``'s loss line), the program's own and every warning; a
        program's own handlers (a ``FileHandler`` …) still get every line.

    Returns:
      The ``tensorflow`` logger.

    Raises:
      ValueError: if ``verbosity`` is not one of the names above or an int.

    Example:

        from tfest_kit import logs
        logs.setup("info")
        logs.setup(tensorflow_info=False)  # progress from ProgressHook, not Estimator's lines
    """
    level = _level(verbosity)
    logger = tf2.get_logger()
    for handler in list(logger.handlers):
        # Only the routes to the terminal: TensorFlow's StreamHandler and ours from an earlier
        # call; a program's FileHandler (or any other handler) keeps its lines.
        if type(handler) is logging.StreamHandler or isinstance(handler, _OneRouteHandler):
            logger.removeHandler(handler)
    logger.addHandler(_OneRouteHandler(tensorflow_info))
    logger.propagate = False
    logger.setLevel(level)
    _set_deprecation_warnings(show_deprecations)
    return logger


@contextlib.contextmanager
def quieted(level: int = logging.WARNING) -> Iterator[None]:
    """Raises TensorFlow's log level for the ``with`` block, e.g. around a second Estimator
    built only to hand on, whose constructor would log the whole ``RunConfig`` again.

    Args:
      level: the least severe level still printed inside the block.

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
    """Runs at import: deprecation warnings off, the filters above on; handlers left alone."""
    _set_deprecation_warnings(False)
