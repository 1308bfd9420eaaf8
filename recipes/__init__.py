"""Runnable end-to-end programs: ``python -m recipes.NAME``.

A Ctrl-C before a recipe's ``main`` runs (TensorFlow takes seconds to import) ends it with
one line, as ``recipes/_interrupt.py`` does once it runs, instead of a 50-line traceback
through the import machinery. A Ctrl-C that an extension module swallowed while it was
imported (Cython prints "Exception ignored in ..." and goes on) still ends the recipe:
``recipes._flags.run`` sees it was pressed and stops before ``main``.
"""

from __future__ import annotations

import signal
import sys

ctrl_c_pressed = False


def running_recipe() -> str:
    """The name of the recipe this process runs (``python -m recipes.NAME``), else ``""``."""
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(main_spec, "name", "") or ""
    return name.rsplit(".", 1)[-1] if name.startswith(__name__ + ".") else ""


def _one_line_for_ctrl_c(exc_type, exc, tb, _previous=sys.excepthook) -> None:
    name = running_recipe()
    # An extension module being imported may turn it into its own error (pybind11's
    # "ImportError: initialization failed", raised from the KeyboardInterrupt).
    cause = getattr(exc, "__cause__", None) or getattr(exc, "__context__", None)
    if ctrl_c_pressed and isinstance(cause, KeyboardInterrupt):
        exc_type = KeyboardInterrupt
    if issubclass(exc_type, KeyboardInterrupt) and name:
        print(f"{name}: interrupted", file=sys.stderr)
        return
    _previous(exc_type, exc, tb)


def _record_ctrl_c(signum, frame) -> None:
    global ctrl_c_pressed
    ctrl_c_pressed = True
    signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt, as before


sys.excepthook = _one_line_for_ctrl_c
# A process that ignores SIGINT (nohup, a harness) keeps ignoring it.
if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _record_ctrl_c)
