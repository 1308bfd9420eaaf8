"""Runnable end-to-end programs: ``python -m recipes.NAME``.

A Ctrl-C before a recipe's ``main`` runs (TensorFlow takes seconds to import) ends it with
one line, as ``recipes/_interrupt.py`` does once it runs, instead of a 50-line traceback
through the import machinery.
"""

from __future__ import annotations

import sys


def _one_line_for_ctrl_c(exc_type, exc, tb, _previous=sys.excepthook) -> None:
    # Only in a recipe's own process: the module running as __main__ is one of ours.
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(main_spec, "name", "") or ""
    if issubclass(exc_type, KeyboardInterrupt) and name.startswith(__name__ + "."):
        print(f"{name.rsplit('.', 1)[-1]}: interrupted", file=sys.stderr)
        return
    _previous(exc_type, exc, tb)


sys.excepthook = _one_line_for_ctrl_c
