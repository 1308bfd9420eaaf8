"""Scopes the TF1 stand-in to the user's code: the script and modules from its directory.

Replacing ``sys.modules['tensorflow']`` would hand the stand-in to TensorFlow's own modules
too (tensorflow_estimator's ``canned/rnn.py`` does ``import tensorflow as tf`` when it is
first imported, possibly mid-run).  Instead, user code runs with its own ``__builtins__``
whose ``__import__`` answers ``tensorflow`` (and ``tensorflow.contrib…``,
``tensorflow.compat.v1…``, …) with the stand-in; every other module keeps Python's import.

- The script gets those builtins through ``runpy.run_path(init_globals=…)``.
- Modules whose source lies under the script's directory are loaded by a ``sys.meta_path``
  finder that puts the same builtins into their namespace before running them.  Functions
  defined there keep them, so imports inside functions are scoped as well.

Caveat: ``importlib.import_module("tensorflow")`` bypasses ``__import__`` and returns the real
package; TF1 scripts import with the ``import`` statement.

Example:

    scope = Scope("/path/to/scripts", build_namespace(Report()))
    with scope:
        runpy.run_path(script, init_globals={"__builtins__": scope.builtins},
                       run_name="__main__")
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence
from typing import Any, Optional

from tfest_kit.legacy._namespace import VIRTUAL_ROOTS
from tfest_kit.legacy._shim import PRIVATE, Report

__all__ = ["Scope"]

# Never scope our own package, even when a script sits in a directory that contains it.
_NEVER_SCOPED = ("tfest_kit",)
_INSTALLED_DIRS = frozenset({"site-packages", "dist-packages"})


class _ScopedLoader(importlib.machinery.SourceFileLoader):
    """Runs a user module with the scoped builtins in its namespace."""

    def __init__(self, fullname: str, path: str, scoped_builtins: dict) -> None:
        super().__init__(fullname, path)
        self._scoped_builtins = scoped_builtins

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["__builtins__"] = self._scoped_builtins
        super().exec_module(module)


class _ScriptDirFinder(importlib.abc.MetaPathFinder):
    """Finds Python source modules under ``root`` and loads them with :class:`_ScopedLoader`."""

    def __init__(self, root: str, scoped_builtins: dict) -> None:
        self._root = root
        self._builtins = scoped_builtins

    def _under_root(self, path: str) -> bool:
        real = os.path.realpath(path)
        if not (real == self._root or real.startswith(self._root + os.sep)):
            return False
        # Installed packages under the script's directory (a project .venv inside a BERT
        # clone) are third-party code, which keeps the real tensorflow.
        inner = os.path.relpath(real, self._root).split(os.sep)
        return not _INSTALLED_DIRS.intersection(inner)

    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]] = None,
        target: Optional[types.ModuleType] = None,
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname.partition(".")[0] in _NEVER_SCOPED:
            return None
        search = [self._root] if path is None else [p for p in path if self._under_root(p)]
        if not search:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, search, target)
        if (
            spec is None
            or type(spec.loader) is not importlib.machinery.SourceFileLoader
            or not self._under_root(spec.origin)
        ):
            return None
        spec.loader = _ScopedLoader(fullname, spec.origin, self._builtins)
        return spec


class Scope:
    """Makes ``import tensorflow`` in user code under ``root`` return ``namespace``.

    Args:
      root: the script's directory; modules whose source is under it are user code.
      namespace: the TF1 stand-in (see :func:`tfest_kit.legacy._namespace.build_namespace`).
      report: when given, imports of TensorFlow's private modules (``tensorflow.python…``)
        from user code are recorded in it.

    Attributes:
      builtins: the ``__builtins__`` dict to run the script itself with.

    Example:

        with Scope(script_dir, namespace) as scope:
            exec(code, {"__builtins__": scope.builtins, "__name__": "__main__"})
    """

    def __init__(
        self, root: str, namespace: types.ModuleType, report: Optional[Report] = None
    ) -> None:
        self.root = os.path.realpath(root)
        self.namespace = namespace
        self._report = report
        self._import = builtins.__import__
        self.builtins = dict(builtins.__dict__)
        self.builtins["__import__"] = self._scoped_import
        self._finder = _ScriptDirFinder(self.root, self.builtins)

    def __enter__(self) -> Scope:
        sys.meta_path.insert(0, self._finder)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)

    def resolve(self, name: str) -> Optional[types.ModuleType]:
        """Returns the stand-in for module ``name`` (``tensorflow.contrib.tpu`` …), else None.

        Raises:
          ModuleNotFoundError: for a name under the stand-in that it does not provide
            (``tensorflow.contrib.foo``), with the stand-in's explanation.
        """
        parts = name.split(".")
        if parts[0] != "tensorflow":
            return None
        if len(parts) > 1 and parts[1] not in VIRTUAL_ROOTS:
            return None
        module = self.namespace
        for part in parts[1:]:
            try:
                module = getattr(module, part)
            except AttributeError as e:
                raise ModuleNotFoundError(str(e), name=name) from e
        return module

    def _scoped_import(
        self,
        name: str,
        globals: Optional[dict] = None,  # noqa: A002  (the signature of __import__)
        locals: Optional[dict] = None,  # noqa: A002
        fromlist: Sequence[str] = (),
        level: int = 0,
    ) -> Any:
        if level != 0 or not (name == "tensorflow" or name.startswith("tensorflow.")):
            return self._import(name, globals, locals, fromlist, level)
        module = self.resolve(name)
        if module is None:
            # A real submodule (tensorflow.python…): import it for real, but the name bound
            # by `import tensorflow.x.y` is still the stand-in.
            real = self._import(name, globals, locals, fromlist, level)
            if self._report is not None:
                self._report.add(name, PRIVATE, name)
            return real if fromlist else self.namespace
        if not fromlist:
            return self.namespace
        for item in fromlist:
            if item == "*":
                continue
            try:
                getattr(module, item)
            except AttributeError as e:
                # `from x import y` would otherwise replace our message with a generic one.
                raise ImportError(str(e), name=name) from e
        return module
