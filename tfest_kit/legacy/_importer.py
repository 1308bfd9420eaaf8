"""Scopes the TF1 stand-in to the user's code: the script and the project's own modules.

Replacing ``sys.modules['tensorflow']`` would hand the stand-in to TensorFlow's own modules
too (tensorflow_estimator's ``canned/rnn.py`` does ``import tensorflow as tf`` when it is
first imported, possibly mid-run).  Instead, user code runs with its own ``__builtins__``
whose ``__import__`` answers ``tensorflow`` and ``tensorflow.<name>…`` for every public
``<name>`` of the stand-in (``tensorflow.contrib…``, ``tensorflow.compat.v1…``,
``tensorflow.keras.optimizers``, ``tensorflow.train`` …) with the stand-in; TensorFlow's
implementation packages (``tensorflow.python…``, see ``REAL_PACKAGES``) are imported for real.
Every other module keeps Python's import, but for ``tensorflow_estimator``: its modules that
lead to the TPU classes (``tensorflow_estimator.python.estimator.tpu.tpu_estimator`` …) are
stand-ins serving ``tfest_kit.tpu``'s classes, the rest is the real package.

- The script gets those builtins through ``runpy.run_path(init_globals=…)``.
- User modules are loaded by a ``sys.meta_path`` finder that puts the same builtins into their
  namespace before running them.  Functions defined there keep them, so imports inside
  functions are scoped as well.  A user module is a Python source file that the ordinary
  import finds (the finder never changes *which* file is imported) under one of the scope's
  roots: the script's directory, the current directory, ``PYTHONPATH`` entries (see
  :func:`user_code_roots`) and the directories user code itself adds to ``sys.path`` while it
  runs (``sys.path.append("..")`` to reach the project's library), but not under a
  ``site-packages``/``dist-packages`` directory nor in the standard library: installed
  libraries keep the real ``tensorflow``, but for those named with ``--tf1-package``
  (``packages``), whose modules are all user code.

User code's ``import numpy`` gets the installed NumPy with the names TF 1.15's NumPy (1.16-1.18)
had and later releases removed (``np.bool``, ``np.int``, ``np.float``, ``np.float_``, ``np.NaN``,
``np.asscalar`` …), ``np.array`` of ragged lists makes an object array and ``np.sum`` of a
generator adds it up: TF1 code relies on them, and NumPy 1.23, 1.24 and 2.x turned them into
errors (the runner also prints NumPy scalars as NumPy 1 did, see ``tfest_kit.legacy._runner``).
Methods of ``ndarray`` NumPy 2 removed (``tostring``, ``itemset`` …) cannot be added back:
they raise NumPy's ``AttributeError``. Likewise ``collections.Iterable`` & co. (gone in 3.10),
``inspect.getargspec`` (3.11), ``fractions.gcd`` and ``base64.encodestring`` (3.9),
``time.clock`` (3.8) and the module ``xml.etree.cElementTree`` (3.9; Pascal VOC readers import
it): TF 1.15 ran on Python 3.5-3.7.  ``import keras`` (``from keras.layers import Dense``)
gets Keras 2, as ``tf.keras`` does: ``tf_keras`` where TensorFlow's ``keras`` is Keras 3
(2.16+).  Where TensorFlow no longer has them (2.16+),
``tensorflow.python.estimator…``, TF 1.13-2.15's forwarders, are ``tensorflow_estimator``'s modules.
TF 1.15's ``tensorflow.python.keras.datasets`` / ``preprocessing`` / ``applications`` /
``estimator``, which TensorFlow 2's older copy of Keras lacks, are the script's ``tf.keras`` ones.
``from tensorflow.python.ops import control_flow_ops`` (and the other private modules in
``_TF_MOVED``) gives the module with the TF 1.15 names TensorFlow 2 moved elsewhere (``cond``).
So do the imports of the installed libraries the runner serves as ``tf.contrib``
(``SERVED_LIBRARIES``: ``tf_slim``, contrib's code carried on, whose ``streaming_concat`` reads
``control_flow_ops.cond``), which otherwise keep the real TensorFlow 2 they were written for.

Caveat: ``importlib.import_module("tensorflow")`` bypasses ``__import__`` and returns the real
package; TF1 scripts import with the ``import`` statement.

Example:

    scope = Scope(user_code_roots("/path/to/scripts"), build_namespace(Report()))
    with scope:
        runpy.run_path(script, init_globals={"__builtins__": scope.builtins},
                       run_name="__main__")
"""

from __future__ import annotations

import base64
import builtins
import collections.abc
import contextlib
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import math
import os
import sys
import sysconfig
import time
import types
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional, Union

import numpy

from tfest_kit._tf import KERAS_PACKAGE, tf
from tfest_kit.legacy._namespace import ESTIMATOR_PACKAGE, REAL_PACKAGES, build_estimator_package
from tfest_kit.legacy._refused import Refused, below_package, refused_module
from tfest_kit.legacy._shim import PRIVATE, Report

__all__ = ["Scope", "user_code_roots", "served_libraries", "INSTALLED_DIRS", "SERVED_LIBRARIES"]

# Never scope our own package, even when a script sits in a directory that contains it.
_NEVER_SCOPED = ("tfest_kit",)
INSTALLED_DIRS = frozenset({"site-packages", "dist-packages"})
# Installed libraries the runner serves as tf.contrib -> what they serve.
SERVED_LIBRARIES = {"tf_slim": "tf.contrib.slim / tf.contrib.layers / tf.contrib.framework"}


def _asscalar(a: Any) -> Any:
    """NumPy 1.16's ``np.asscalar`` (removed in 1.23): ``a.item()``."""
    return a.item()


# NumPy 1.16-1.18's names that NumPy 1.23 / 1.24 / 2.0 removed: a builtin, the NumPy name it
# was, or a function doing what it did.
_NUMPY_REMOVED = {
    **{"bool": bool, "int": int, "float": float, "complex": complex, "object": object},
    **{"str": str, "long": int, "unicode": str, "NINF": -numpy.inf, "PZERO": 0.0, "NZERO": -0.0},
    **dict.fromkeys(["NaN", "NAN"], "nan"),
    **dict.fromkeys(["Inf", "Infinity", "infty", "PINF"], "inf"),
    **{"float_": "float64", "complex_": "complex128", "cfloat": "complex128"},
    **{"string_": "bytes_", "bytes0": "bytes_", "unicode_": "str_", "str0": "str_"},
    **{"bool8": "bool_", "int0": "intp", "uint0": "uintp", "object0": "object_"},
    **{"longfloat": "longdouble", "longcomplex": "clongdouble", "clongfloat": "clongdouble"},
    **{"singlecomplex": "complex64", "product": "prod", "cumproduct": "cumprod"},
    **{"sometrue": "any", "alltrue": "all", "round_": "round", "mat": "asmatrix"},
    **{"trapz": "trapezoid", "asscalar": _asscalar},
}


def _ragged_as_objects(function: Any) -> Any:
    """``np.array`` / ``np.asarray`` making an object array of ragged nested sequences without a
    ``dtype``, as NumPy did until 1.24 (now a ValueError, "inhomogeneous shape")."""

    @functools.wraps(function)
    def make(obj: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return function(obj, *args, **kwargs)
        except ValueError as e:
            if args or kwargs.get("dtype") is not None or "inhomogeneous" not in str(e):
                raise
            return function(obj, *args, **dict(kwargs, dtype=object))

    return make


def _sum_of_generators(function: Any) -> Any:
    """``np.sum(generator)``: the builtin ``sum``, as NumPy 1.x did (a TypeError since 2.x)."""

    @functools.wraps(function)
    def total(a: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(a, types.GeneratorType) and not args and not kwargs:
            return sum(a)
        return function(a, *args, **kwargs)

    return total


_ArgSpec = collections.namedtuple("ArgSpec", "args varargs keywords defaults")


def _getargspec(func: Any) -> _ArgSpec:
    """Python 3.7's ``inspect.getargspec``: ``getfullargspec`` without keyword-only arguments."""
    spec = inspect.getfullargspec(func)
    if spec.kwonlyargs or spec.annotations:
        raise ValueError(
            "Function has keyword-only parameters or annotations, use inspect.signature() API "
            "which can support them"
        )
    return _ArgSpec(spec.args, spec.varargs, spec.varkw, spec.defaults)


# What TF1 code of TF 1.15's time (Python 3.5-3.7) found in modules that have since lost it.
_REMOVED = {
    "numpy": _NUMPY_REMOVED,
    "collections": dict.fromkeys(collections.abc.__all__, collections.abc),
    "time": {"clock": time.process_time},  # on Unix, time.clock() was the processor time
    "inspect": {"getargspec": _getargspec, "ArgSpec": _ArgSpec},
    "fractions": {"gcd": math.gcd},
    "base64": {"encodestring": base64.encodebytes, "decodestring": base64.decodebytes},
}


def _same(*names: str) -> dict[str, str]:
    return {name: name for name in names}


class _Changed(str):
    """The stand-in's path of a name the module still has with TensorFlow 2's meaning: the
    TF 1.15 one is taken instead (``device.DeviceSpec`` was ``DeviceSpecV1``, with
    ``merge_from``)."""


# TF 1.15's names in TensorFlow's private modules that TensorFlow 2 moved to other modules
# (checked against TF 1.15's sources and 2.15 / 2.21): module -> {name: its path in the stand-in,
# or what it was}. TF1 code imports them (`control_flow_ops.cond`, `ops.Tensor`, BERT-NER's
# `variable_scope.variable`, `graph_util.convert_variables_to_constants` in freezing scripts).
_GRAPH_UTIL = {"convert_variables_to_constants": "graph_util.convert_variables_to_constants"}
_TF_MOVED = {
    "tensorflow.python.framework.ops": {
        **_same("Tensor", "IndexedSlices", "convert_to_tensor_or_indexed_slices"),
        **_same("register_tensor_conversion_function", "enable_tensor_equality"),
        **_same("disable_tensor_equality"),
        # Not in tf.compat.v1: from the module that has it.
        "IndexedSlicesValue": importlib.import_module("tensorflow.python.framework.indexed_slices"),
    },
    "tensorflow.python.framework.device": {"DeviceSpec": _Changed("DeviceSpec")},
    "tensorflow.python.framework.graph_util": _GRAPH_UTIL,
    "tensorflow.python.framework.graph_util_impl": _GRAPH_UTIL,
    "tensorflow.python.framework.tensor_shape": {
        "scalar": lambda: tf.TensorShape([]),
        "vector": lambda length: tf.TensorShape([length]),
        "matrix": lambda rows, cols: tf.TensorShape([rows, cols]),
    },
    "tensorflow.python.ops.array_ops": _same("stack", "unstack"),
    "tensorflow.python.ops.control_flow_ops": _same(
        "cond", "while_loop", "case", "switch_case", "Assert"
    ),
    "tensorflow.python.ops.random_ops": _same("random_crop"),
    # Copies of TF 1.12's tpu_estimator.py register variables' proto functions with these.
    "tensorflow.python.ops.resource_variable_ops": dict.fromkeys(
        ("_to_proto_fn", "_from_proto_fn"),
        importlib.import_module("tensorflow.python.ops.ref_variable"),
    ),
    "tensorflow.python.ops.variable_scope": {
        "variable": "Variable",
        **_same("enable_resource_variables", "disable_resource_variables"),
        **_same("resource_variables_enabled"),
    },
    "tensorflow.python.ops.variables": {
        "VariableV1": "Variable",
        **_same("is_variable_initialized"),
    },
    "tensorflow.python.util.nest": {"is_sequence": "nest.is_nested"},
}


class _WithRemoved(types.ModuleType):
    """``module`` as installed, and for a name it lacks, what it had then (``_REMOVED``); NumPy's
    ``array`` and ``asarray`` of ragged sequences make object arrays, as then.

    ``removed`` maps a name to what it was, or to a dotted path of it in ``root`` (the module
    itself by default): a TensorFlow module's moved names are found in the TF1 stand-in.
    """

    def __init__(
        self, module: types.ModuleType, removed: Optional[dict] = None, root: Any = None
    ) -> None:
        super().__init__(module.__name__, module.__doc__)
        self.__spec__, self.__loader__ = module.__spec__, module.__loader__
        for name in ("__file__", "__path__"):
            if hasattr(module, name):
                setattr(self, name, getattr(module, name))
        self.__real, self.__root = module, module if root is None else root
        self.__removed = _REMOVED[module.__name__] if removed is None else removed
        if module is numpy:
            self.array, self.asarray = map(_ragged_as_objects, (numpy.array, numpy.asarray))
            self.sum = _sum_of_generators(numpy.sum)

    def __getattr__(self, name: str) -> Any:
        if name not in self.__removed:
            value = getattr(self.__real, name)
        elif isinstance(self.__removed[name], _Changed):
            value = None
        else:
            with warnings.catch_warnings():  # NumPy's "np.bool will be defined as …"
                warnings.simplefilter("ignore", FutureWarning)
                value = getattr(self.__real, name, None)
        if name in self.__removed and value is None:
            value = self.__removed[name]  # its name in the module, the module, or itself
            if isinstance(value, str):
                value = functools.reduce(getattr, value.split("."), self.__root)
            elif isinstance(value, types.ModuleType):
                value = getattr(value, name)
        self.__dict__[name] = value  # found once: later reads are plain module lookups
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self.__real)) | set(self.__removed))


class _PrivatePackage(types.ModuleType):
    """TensorFlow's package ``module`` (``tensorflow.python`` …) as ``import tensorflow.python.x.y
    as z`` walks it, attribute by attribute: a module that lost TF 1.15 names (``_TF_MOVED``)
    comes with them, as in ``from tensorflow.python.x import y``; anything else is the real one."""

    def __init__(self, module: types.ModuleType, as_tf115: Callable[[str, Any], Any]) -> None:
        super().__init__(module.__name__, module.__doc__)
        for name in ("__file__", "__path__", "__spec__", "__loader__"):
            setattr(self, name, getattr(module, name, None))
        self.__real, self.__as_tf115 = module, as_tf115

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.__real, name)
        full = f"{self.__name__}.{name}"
        if full in _TF_MOVED:
            value = self.__as_tf115(full, value)  # the module `from … import` gets
        elif isinstance(value, types.ModuleType) and any(
            m.startswith(full + ".") for m in _TF_MOVED
        ):
            value = _PrivatePackage(value, self.__as_tf115)
        self.__dict__[name] = value
        return value

    def __dir__(self) -> list[str]:
        return dir(self.__real)


def _with_moved_names(
    name: str, module: types.ModuleType, fromlist: Sequence[str], as_tf115: Callable
) -> Any:
    """What ``from <name> import <fromlist>`` reads its names from: ``module``, or, where the
    names are (or are in) private modules that lost TF 1.15 names, ``as_tf115(name, module)``."""
    if name in _TF_MOVED:  # from tensorflow.python.ops.control_flow_ops import cond
        return as_tf115(name, module)
    moved = [i for i in fromlist if f"{name}.{i}" in _TF_MOVED and hasattr(module, i)]
    if not moved:
        return module
    # from tensorflow.python.ops import control_flow_ops, math_ops
    holder = types.ModuleType(name)
    holder.__dict__.update({i: getattr(module, i) for i in fromlist if hasattr(module, i)})
    holder.__dict__.update({i: as_tf115(f"{name}.{i}", getattr(module, i)) for i in moved})
    return holder


@functools.cache
def _library_view(name: str, module: types.ModuleType) -> _WithRemoved:
    # The moved names from tf.compat.v1 itself: a served library's uses are not the script's,
    # so they stay out of the stand-in's report.
    return _WithRemoved(module, _TF_MOVED[name], tf)


_REAL_IMPORT = builtins.__import__


def _library_import(
    name: str,
    globals: Optional[dict] = None,  # noqa: A002  (the signature of __import__)
    locals: Optional[dict] = None,  # noqa: A002
    fromlist: Sequence[str] = (),
    level: int = 0,
) -> Any:
    """``__import__`` for a served library: the real one, but for the TF 1.15 names TF 2 moved."""
    module = _REAL_IMPORT(name, globals, locals, fromlist, level)
    if level != 0 or not fromlist or not name.startswith("tensorflow.python"):
        return module
    return _with_moved_names(name, module, fromlist, _library_view)


_LIBRARY_BUILTINS = {**builtins.__dict__, "__import__": _library_import}


@functools.cache
def _system_dirs() -> tuple[str, ...]:
    # The standard library and the interpreter's own site-packages: never user code, even
    # when a root (cwd=/, say) contains them.
    paths = sysconfig.get_paths()
    keys = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(sorted({os.path.realpath(paths[k]) for k in keys if paths.get(k)}))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _installed(path: str) -> bool:
    return bool(INSTALLED_DIRS.intersection(path.split(os.sep))) or any(
        _inside(path, d) for d in _system_dirs()
    )


def _inside_a_package(root: str) -> bool:
    """Whether ``root`` is a folder below site-packages (a script's package), not one itself.

    A script run from ``site-packages/toolkit/`` gives its siblings the stand-in; one run from
    ``site-packages/`` itself must not give it to every installed package.
    """
    parts = root.split(os.sep)
    below = [i for i, part in enumerate(parts) if part in INSTALLED_DIRS]
    return bool(below) and below[-1] < len(parts) - 1 and root not in _system_dirs()


def user_code_roots(first: Optional[str] = None) -> list[str]:
    """Returns the directories whose modules are user code: ``first``, cwd, ``PYTHONPATH``.

    A TF1 project often keeps its library beside the scripts (``mylib/`` next to
    ``scripts/train.py``, run from the project root or with the root on ``PYTHONPATH``);
    those modules need the stand-in as much as the script does.

    Args:
      first: the script's directory, if any.

    Returns:
      Real paths of ``first``, the current directory and the ``PYTHONPATH`` entries, in that
      order, without duplicates, missing directories, ``site-packages``/``dist-packages``
      directories and the standard library (but for ``first``: a script run from an installed
      package still gives its sibling modules the stand-in, as it always did).
    """
    roots: list[str] = []
    if first and os.path.isdir(first):
        roots.append(os.path.realpath(first))
    candidates = [os.getcwd(), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    for candidate in candidates:
        if not candidate:
            continue
        real = os.path.realpath(candidate)
        if os.path.isdir(real) and not _installed(real) and real not in roots:
            roots.append(real)
    return roots


class _ScopedLoader(importlib.machinery.SourceFileLoader):
    """Runs a user module with the scoped builtins in its namespace."""

    def __init__(self, fullname: str, path: str, scoped_builtins: dict) -> None:
        super().__init__(fullname, path)
        self._scoped_builtins = scoped_builtins

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["__builtins__"] = self._scoped_builtins
        super().exec_module(module)


# Modules Python has removed since 3.7 -> the module whose public names they held.
_REMOVED_MODULES = {"xml.etree.cElementTree": "xml.etree.ElementTree"}


class _RemovedModuleLoader(importlib.abc.Loader):
    """A removed module as it was: the public names of the module it repeated."""

    def exec_module(self, module: types.ModuleType) -> None:
        source = importlib.import_module(_REMOVED_MODULES[module.__name__])
        names = getattr(source, "__all__", [n for n in vars(source) if not n.startswith("_")])
        module.__dict__.update({name: getattr(source, name) for name in names})


# The script's tf.keras (tf.compat.v1.keras: Keras 2's v1 API), named when first needed.
_SCRIPTS_KERAS = "tf.keras"
# Forwarders TensorFlow had and later dropped -> the module they forwarded to: TF 1.13-2.15's
# `tensorflow.python.estimator…` (TPU-era projects import it), 2.15's `training_ops` (custom
# optimizers call `training_ops.apply_adam`), and TF 1.15's Keras packages that TensorFlow's
# own older copy of Keras (`tensorflow.python.keras`) no longer has: TF 1.x tutorials'
# `from tensorflow.python.keras.datasets import imdb`, TF 1.15's tf.keras.datasets.imdb.
_FORWARDERS = {
    "tensorflow.python.estimator": "tensorflow_estimator.python.estimator",
    "tensorflow.python.training.training_ops": "tensorflow.python.ops.gen_training_ops",
    "tensorflow.python.training.gen_training_ops": "tensorflow.python.ops.gen_training_ops",
    **{
        f"tensorflow.python.keras.{name}": f"{_SCRIPTS_KERAS}.{name}"
        for name in ("applications", "datasets", "estimator", "preprocessing")
    },
}


def _forwarded(fullname: str) -> Optional[str]:
    """The module ``fullname`` forwarded to, if it is below a forwarder TensorFlow dropped."""
    for forwarder, target in _FORWARDERS.items():
        below = fullname == forwarder or fullname.startswith(forwarder + ".")
        if below and not _tf_has(forwarder):
            if target.startswith(_SCRIPTS_KERAS + "."):
                target = tf.keras.__name__ + target[len(_SCRIPTS_KERAS) :]
            return target + fullname[len(forwarder) :]
    return None


@functools.cache
def _tf_has(module: str) -> bool:
    parent, _, _ = module.rpartition(".")
    path = importlib.import_module(parent).__path__
    return importlib.machinery.PathFinder.find_spec(module, path) is not None


class _AliasLoader(importlib.abc.Loader):
    """Makes a dropped forwarder (``tensorflow.python.estimator…``) the module it forwarded to.

    The module being imported replaces itself in ``sys.modules`` with the real one, which the
    import statement then returns (Python's import supports that), so both names are one module.
    """

    def exec_module(self, module: types.ModuleType) -> None:
        sys.modules[module.__name__] = importlib.import_module(_forwarded(module.__name__))


class _UserCodeFinder(importlib.abc.MetaPathFinder):
    """Loads Python source modules under ``roots`` with :class:`_ScopedLoader`.

    It finds modules as ``PathFinder`` does (``sys.path`` order, or the package's
    ``__path__``), so it only changes how a user module is run, never which file is imported.
    """

    def __init__(
        self, roots: Sequence[str], scoped_builtins: dict, packages: Sequence[str] = ()
    ) -> None:
        self._roots = tuple(roots)
        self._builtins = scoped_builtins
        self._packages = frozenset(packages)
        self._path_at_start: frozenset[str] = frozenset()

    def start(self) -> None:
        """Remembers ``sys.path``: the entries user code adds later are roots too."""
        self._path_at_start = frozenset(sys.path)

    def _all_roots(self) -> tuple[str, ...]:
        added = [p for p in sys.path if p not in self._path_at_start and isinstance(p, str)]
        if not added:
            return self._roots
        more = [os.path.realpath(p or os.curdir) for p in added]
        return self._roots + tuple(p for p in more if os.path.isdir(p) and not _installed(p))

    def _under_root(self, path: str) -> bool:
        real = os.path.realpath(path)
        in_system_dirs = any(_inside(real, d) for d in _system_dirs())
        for root in self._all_roots():
            if not _inside(real, root):
                continue
            # Installed packages under a root (a project .venv inside a BERT clone) are
            # third-party code, which keeps the real tensorflow.
            inner = os.path.relpath(real, root).split(os.sep)
            if INSTALLED_DIRS.intersection(inner):
                continue
            # The standard library and site-packages are never user code (cwd=/ holds them),
            # except below a root that is itself installed: the directory of a script run
            # from an installed package, given on purpose.
            if not in_system_dirs or _inside_a_package(root):
                return True
        return False

    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]] = None,
        target: Optional[types.ModuleType] = None,
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname in _REMOVED_MODULES:
            return importlib.machinery.ModuleSpec(fullname, _RemovedModuleLoader())
        target = _forwarded(fullname)
        if target is not None:
            if importlib.util.find_spec(target) is None:
                return None
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader())
        top = fullname.partition(".")[0]
        if top in _NEVER_SCOPED:
            return None
        # A package handed the stand-in with --tf1-package, wherever it is installed.
        handed = top in self._packages
        if not handed and path is not None and not any(self._under_root(p) for p in path):
            return None  # a submodule of a package outside the roots: the common case, fast
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if (
            spec is None
            or type(spec.loader) is not importlib.machinery.SourceFileLoader
            or not (handed or self._under_root(spec.origin))
        ):
            return None
        spec.loader = _ScopedLoader(fullname, spec.origin, self._builtins)
        return spec


class _ServedLibraryFinder(importlib.abc.MetaPathFinder):
    """Loads the modules of ``SERVED_LIBRARIES`` with :data:`_LIBRARY_BUILTINS`."""

    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]] = None,
        target: Optional[types.ModuleType] = None,
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname.partition(".")[0] not in SERVED_LIBRARIES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader:
            return None
        spec.loader = _ScopedLoader(fullname, spec.origin, _LIBRARY_BUILTINS)
        return spec


@contextlib.contextmanager
def served_libraries() -> Iterator[None]:
    """While active, the libraries the runner serves as ``tf.contrib`` (``SERVED_LIBRARIES``)
    are imported with the TF 1.15 names TensorFlow 2 moved out of its private modules.

    A library imported before keeps what it got; one imported inside keeps the view after.
    A :class:`Scope` entered inside takes precedence (``--tf1-package tf_slim`` gives it the
    stand-in).

    Example:

        with served_libraries(), Scope(roots, namespace) as scope:
            runpy.run_path(script, init_globals={"__builtins__": scope.builtins})
    """
    finder = _ServedLibraryFinder()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


class Scope:
    """Makes ``import tensorflow`` in user code under ``roots`` return ``namespace``.

    Args:
      roots: a directory or directories (see :func:`user_code_roots`); modules whose source
        is under one of them, and not under a ``site-packages`` directory there, are user code.
        Only modules found on ``sys.path`` (or in a package's ``__path__``) are loaded.
      namespace: the TF1 stand-in (see :func:`tfest_kit.legacy._namespace.build_namespace`).
      report: when given, imports of TensorFlow's private modules (``tensorflow.python…``)
        from user code are recorded in it.
      estimator_package: stand-ins for ``tensorflow_estimator`` modules (see
        :func:`tfest_kit.legacy._namespace.build_estimator_package`; built when not given).
      packages: top-level names of installed packages that get the stand-in too, wherever
        they are installed (``--tf1-package``); they must not be imported yet.

    Attributes:
      builtins: the ``__builtins__`` dict to run the script itself with.

    Example:

        with Scope([script_dir], namespace) as scope:
            exec(code, {"__builtins__": scope.builtins, "__name__": "__main__"})
    """

    def __init__(
        self,
        roots: Union[str, Sequence[str]],
        namespace: types.ModuleType,
        report: Optional[Report] = None,
        estimator_package: Optional[dict[str, types.ModuleType]] = None,
        packages: Sequence[str] = (),
    ) -> None:
        roots = [roots] if isinstance(roots, str) else list(roots)
        if estimator_package is None:
            estimator_package = build_estimator_package(report or Report())
        self._estimator_package = estimator_package
        self.roots = [os.path.realpath(r) for r in roots]
        self.namespace = namespace
        self._report = report
        self._import = builtins.__import__
        self.builtins = dict(builtins.__dict__)
        self.builtins["__import__"] = self._scoped_import
        self._finder = _UserCodeFinder(self.roots, self.builtins, packages)
        self._public: Optional[frozenset[str]] = None
        self._with_removed = {top: _WithRemoved(importlib.import_module(top)) for top in _REMOVED}
        self._tf_moved: dict[str, _WithRemoved] = {}
        # `import tensorflow.python.ops.control_flow_ops as cfo` walks it from the stand-in.
        namespace.python = _PrivatePackage(
            importlib.import_module("tensorflow.python"), self._as_tf115
        )

    def __enter__(self) -> Scope:
        self._finder.start()
        sys.meta_path.insert(0, self._finder)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)

    def _in_stand_in(self, top: str) -> bool:
        if top.startswith("_") or top in REAL_PACKAGES:
            return False
        if self._public is None:
            # dir(), not getattr(): probing must not record names in the report.
            self._public = frozenset(dir(self.namespace))
        return top in self._public

    def _refused_below_package(
        self, module: Any, name: str, module_path: bool
    ) -> Optional[Refused]:
        # Looked up in dir() first: a failed getattr would record the name without its hint.
        display = "tf" + name[len("tensorflow") :]
        if not below_package(display, module_path) or name.rpartition(".")[2] in dir(module):
            return None
        return refused_module(display, self._report or Report())

    def resolve(self, name: str) -> Optional[Any]:
        """Returns the stand-in for module ``name`` (``tensorflow.keras.optimizers`` …), else None.

        ``None`` means "import it for real": names outside ``tensorflow`` and TensorFlow's
        implementation packages (``tensorflow.python…``, see ``REAL_PACKAGES``).  A ``tf.contrib``
        module TF 1.15 had and the runner does not serve, and anything below one, is a
        :class:`~tfest_kit.legacy._refused.Refused`: it imports, and refuses at its first use.

        Raises:
          ModuleNotFoundError: for a name under the stand-in that it does not provide and TF
            1.15 did not have (``tensorflow.contrib.foo``), with the stand-in's explanation.
        """
        parts = name.split(".")
        if parts[0] != "tensorflow":
            return None
        if len(parts) > 1 and not self._in_stand_in(parts[1]):
            return None
        module = self.namespace
        for i, part in enumerate(parts[1:], start=2):
            if isinstance(module, Refused):
                module = module.child(part)
                continue
            refused = self._refused_below_package(module, ".".join(parts[:i]), module_path=True)
            if refused is not None:
                module = refused
                continue
            try:
                module = getattr(module, part)
            except AttributeError as e:
                # `from None`: the message is already complete; a chained AttributeError
                # would print it twice.
                raise ModuleNotFoundError(str(e), name=name) from None
        return module

    def _as_tf115(self, name: str, module: types.ModuleType) -> _WithRemoved:
        """TensorFlow's private module ``name`` with the TF 1.15 names it lost (``_TF_MOVED``)."""
        if name not in self._tf_moved:
            self._tf_moved[name] = _WithRemoved(module, _TF_MOVED[name], self.namespace)
        return self._tf_moved[name]

    def _scoped_import(
        self,
        name: str,
        globals: Optional[dict] = None,  # noqa: A002  (the signature of __import__)
        locals: Optional[dict] = None,  # noqa: A002
        fromlist: Sequence[str] = (),
        level: int = 0,
    ) -> Any:
        top = name.partition(".")[0]
        if level == 0 and top == ESTIMATOR_PACKAGE:
            # Imported for real first, so that every submodule the stand-ins fall back to is
            # loaded; then the stand-in where one exists.
            try:
                real = self._import(name, globals, locals, fromlist, level)
            except ModuleNotFoundError:
                # tensorflow_estimator.estimator is an attribute, not a module file.
                if name not in self._estimator_package:
                    raise
                real = None
            if not fromlist:
                return self._estimator_package[ESTIMATOR_PACKAGE]
            return self._estimator_package.get(name, real)
        if level == 0 and top == "keras" and KERAS_PACKAGE != "keras":
            # Keras 2, what TF1-era code was written for (and tf.keras here): Keras 3 names
            # its layers per process, not per graph, so an Estimator's evaluate would not find
            # the variables train saved.
            return self._import(KERAS_PACKAGE + name[len(top) :], globals, locals, fromlist, level)
        if level == 0 and top in _REMOVED:
            module = self._import(name, globals, locals, fromlist, level)
            return self._with_removed[top] if module is sys.modules.get(top) else module
        if level != 0 or top != "tensorflow":
            return self._import(name, globals, locals, fromlist, level)
        module = self.resolve(name)
        if module is None:
            # A real submodule (tensorflow.python…): import it for real, but the name bound
            # by `import tensorflow.x.y` is still the stand-in.
            real = self._import(name, globals, locals, fromlist, level)
            if self._report is not None:
                self._report.add(name, PRIVATE, _forwarded(name) or name)
            if not fromlist:
                return self.namespace
            return _with_moved_names(name, real, fromlist, self._as_tf115)
        if not fromlist:
            return self.namespace
        values = {}
        for item in fromlist:
            if item == "*":
                continue
            if isinstance(module, Refused):
                values[item] = module.child(item)
                continue
            refused = self._refused_below_package(module, f"{name}.{item}", module_path=False)
            if refused is not None:
                values[item] = refused
                continue
            try:
                getattr(module, item)
            except AttributeError as e:
                # `from x import y` would otherwise replace our message with a generic one.
                raise ImportError(str(e), name=name) from None
        if isinstance(module, Refused) or values:
            # `from x import y` reads y off what this returns: a refused name must not raise
            # there, only where the script uses it.
            holder = types.ModuleType(name)
            served = [i for i in fromlist if i != "*" and i not in values]
            holder.__dict__.update({i: getattr(module, i) for i in served})
            holder.__dict__.update(values)
            return holder
        return module
