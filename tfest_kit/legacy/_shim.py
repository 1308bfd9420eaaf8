"""Stand-in module objects that serve TF1 names and remember which ones a script used.

A :class:`ShimModule` answers attribute lookups from its own entries first (the stand-ins the
legacy runner provides), then from the real TensorFlow modules it wraps.  Every name served is
recorded once in a :class:`Report`, so ``--report`` can list what a script still needs from the
shim and from ``tf.compat.v1``.  Submodules reached through a fallback are wrapped too, so the
report names leaves (``tf.train.Optimizer``), not just ``tf.train``.

Example:

    report = Report()
    data = ShimModule(
        "tf.contrib.data", report,
        fallbacks=[(lambda: tf.data.experimental, "tf.data.experimental")], kind=SHIM,
    )
    data.map_and_batch        # recorded as ("tf.contrib.data.map_and_batch", SHIM, hint)
"""

from __future__ import annotations

import sys
import textwrap
import types
from collections.abc import Sequence
from typing import Any, Callable, NamedTuple, Optional

__all__ = ["SHIM", "COMPAT_V1", "PRIVATE", "MISSING", "Entry", "Report", "ShimModule", "as_written"]

SHIM = "shim"
COMPAT_V1 = "compat.v1"
PRIVATE = "private"
# Asked for but not provided: the script failed on it (or probed for it with getattr).
MISSING = "missing"


class Entry(NamedTuple):
    """One name a shim module provides itself.

    Attributes:
      factory: zero-argument callable returning the value; called on first access, so heavy
        modules (``tfest_kit.tpu``) are imported only when a script uses them.
      hint: where the name lives in TensorFlow 2.15 or tfest_kit, shown by ``--report``.
        ``None`` for container modules whose leaves are recorded instead.
    """

    factory: Callable[[], Any]
    hint: Optional[str]


# tf.compat.v1's modules TensorFlow 2.16+ dropped (tf.estimator) or backs with Keras 3.
_LOST_IN_216 = ("tf.compat.v1.estimator.", "tf.compat.v1.layers.", "tf.compat.v1.keras.")


def _tensorflow_version() -> tuple[int, int]:
    from tfest_kit._tf import TF_VERSION  # imports TensorFlow: only when a report is printed

    major, minor = TF_VERSION.split(".")[:2]
    return int(major), int(minor)


class Report:
    """The TF1 names a script was served, in first-use order.

    Example:

        report = Report()
        report.add("tf.contrib.tpu.TPUEstimator", SHIM, "tfest_kit.tpu.TPUEstimator")
        print(report.format("run_classifier.py"))
    """

    def __init__(self) -> None:
        self._used: dict[str, tuple[str, str]] = {}

    def add(self, name: str, kind: str, hint: str) -> None:
        """Records that ``name`` was asked for.

        Args:
          name: the TF1 name, e.g. ``"tf.contrib.tpu.TPUEstimator"``.
          kind: :data:`SHIM`, :data:`COMPAT_V1`, :data:`PRIVATE`, or :data:`MISSING` for a
            name the runner does not provide.
          hint: where the name lives now; for :data:`MISSING`, its replacement or ``""``.
        """
        self._used.setdefault(name, (kind, hint))

    def names(self, kind: Optional[str] = None) -> list[str]:
        """Returns the recorded names, optionally only those of one ``kind``."""
        return [n for n, (k, _) in self._used.items() if kind is None or k == kind]

    def format(self, script: str) -> str:
        """Returns the report as text, one section per kind; names not provided come first."""
        missing = [(n, h) for n, (k, h) in self._used.items() if k == MISSING]
        shim = [(n, h) for n, (k, h) in self._used.items() if k == SHIM]
        compat = sorted(n for n, (k, _) in self._used.items() if k == COMPAT_V1)
        # TensorFlow 2.16+ has no tf.compat.v1.estimator, and its tf.compat.v1.layers / keras
        # are Keras 3's (tf.layers refuses): those run with compat.v1 only after tfest_kit.
        version = _tensorflow_version()
        lost = [
            n for n in compat if version >= (2, 16) and self._used[n][1].startswith(_LOST_IN_216)
        ]
        compat = [n for n in compat if n not in lost]
        release = ".".join(map(str, version))
        # A module TensorFlow dropped is named with where the runner forwarded it.
        private = sorted(
            n if h == n else f"{n} (-> {h})" for n, (k, h) in self._used.items() if k == PRIVATE
        )
        used = len(self._used) - len(missing)
        lines = [f"tfest_kit.legacy report for {script}: {used} TF1 symbols used."]
        if missing:
            # What the script stopped on: the first thing to migrate.
            lines.append(
                f"Not provided: migrate first ({len(missing)}; the runner has no stand-in, "
                "a use raises AttributeError/ImportError):"
            )
            width = max(len(n) for n, _ in missing)
            lines += [f"  {n:<{width}}  ->  {h}" if h else f"  {n}" for n, h in missing]
        if shim:
            lines.append(
                f"Served by the legacy shim ({len(shim)}; TensorFlow {release} has no such name, "
                "migrate these first):"
            )
            width = max(len(n) for n, _ in shim)
            lines += [f"  {n:<{width}}  ->  {h}" for n, h in shim]
        else:
            lines.append("Served by the legacy shim: none.")
        if compat:
            lines.append(
                f"From tf.compat.v1 ({len(compat)}; these run unchanged with "
                "`import tensorflow.compat.v1 as tf`):"
            )
            lines += textwrap.wrap(
                ", ".join(compat), width=98, initial_indent="  ", subsequent_indent="  "
            )
        if lost:
            lines.append(
                f"Lost by tf.compat.v1 in TensorFlow 2.16 ({len(lost)}; TensorFlow {release} has "
                "no tf.estimator and gives tf.layers / tf.keras Keras 3: these run with "
                "`import tensorflow.compat.v1 as tf` after `import tfest_kit`):"
            )
            lines += textwrap.wrap(
                ", ".join(lost), width=98, initial_indent="  ", subsequent_indent="  "
            )
        if private:
            lines.append(
                f"From TensorFlow's private modules ({len(private)}; not a public API, "
                "may break in any release): " + ", ".join(private)
            )
        return "\n".join(lines)


# The module's own namespace, read without ShimModule.__dict__ (which completes it first).
_own = types.ModuleType.__dict__["__dict__"].__get__


def as_written(message: str) -> AttributeError:
    """An ``AttributeError`` Python prints as written: without its "Did you mean" of a near
    name the stand-in has (``Dataset`` -> ``CsvDataset``), appended after the full stop."""
    error = AttributeError(message)
    # Python 3.10+ suggests only for an error whose obj it sets itself (3.9 has no obj: unread).
    setattr(error, "obj", None)  # noqa: B010 (vermin reads error.obj as 3.10-only)
    return error


class ShimModule(types.ModuleType):
    """A module object serving its own entries, then names of the modules it wraps.

    Args:
      display: the name users see in messages and the report, e.g. ``"tf.contrib.tpu"``.
      report: where served names are recorded.
      entries: names this module provides itself.
      fallbacks: ``(getter, hint_prefix)`` pairs tried in order after ``entries``; ``getter``
        returns the real module to read from.
      kind: how names found in ``fallbacks`` are reported (:data:`SHIM` or :data:`COMPAT_V1`).
      provides: a sentence for the error message when a name is missing (what this module
        does provide).
      module_name: ``__name__`` of the stand-in (default ``display``); the top-level one is
        ``"tensorflow"`` so that ``import tensorflow.python.x as y`` finds loaded submodules.
      private_prefix: when set, a name found nowhere else is looked up as an already imported
        module ``private_prefix + "." + name`` (``tf.python`` → ``tensorflow.python``).
      replacements: for names this module does not provide but that have a known
        replacement, the text naming it (``"tf.glorot_uniform_initializer()"``); it goes into
        the error message and the report.

    Raises:
      AttributeError: on access to a name neither the entries nor the fallbacks have; the
        message names the symbol, says that the legacy runner does not provide it and names
        its replacement when ``replacements`` has one.  The name is recorded in the report as
        :data:`MISSING` first.

    Example:

        layers = ShimModule("tf.contrib.layers", report,
                            entries={"layer_norm": Entry(lambda: layer_norm, "…")})
    """

    def __init__(
        self,
        display: str,
        report: Report,
        *,
        entries: Optional[dict[str, Entry]] = None,
        fallbacks: Sequence[tuple[Callable[[], Any], str]] = (),
        kind: str = COMPAT_V1,
        provides: str = "",
        module_name: Optional[str] = None,
        private_prefix: Optional[str] = None,
        replacements: Optional[dict[str, str]] = None,
    ) -> None:
        super().__init__(module_name or display)
        # Stored under a dunder name so it never shadows a TensorFlow name.
        _own(self)["__shim__"] = (
            report,
            dict(entries or {}),
            tuple(fallbacks),
            kind,
            provides,
            display,
            private_prefix,
            dict(replacements or {}),
        )

    def __getattr__(self, name: str) -> Any:
        shim = _own(self)["__shim__"]
        report, entries, fallbacks, kind, provides, display, private, replacements = shim
        if name in entries:
            entry = entries[name]
            value = entry.factory()
            if entry.hint is not None:
                report.add(f"{display}.{name}", SHIM, entry.hint)
            _own(self)[name] = value
            return value
        for getter, prefix in fallbacks:
            module = getter()
            try:
                value = getattr(module, name)
            except AttributeError:
                continue
            if name.startswith("__"):
                return value
            if isinstance(value, types.ModuleType):
                value = ShimModule(
                    f"{display}.{name}",
                    report,
                    fallbacks=[(lambda value=value: value, f"{prefix}.{name}")],
                    kind=kind,
                )
            else:
                report.add(f"{display}.{name}", kind, f"{prefix}.{name}")
            _own(self)[name] = value
            return value
        if name.startswith("__"):
            raise AttributeError(f"module {display!r} has no attribute {name!r}")
        module = sys.modules.get(f"{private}.{name}") if private else None
        if module is not None:
            report.add(f"{display}.{name}", PRIVATE, f"{private}.{name}")
            _own(self)[name] = module
            return module
        replacement = replacements.get(name, "")
        if not name.startswith("_"):
            report.add(f"{display}.{name}", MISSING, replacement)
        if replacement:
            raise as_written(
                f"{display}.{name} is not provided by the legacy runner (tfest_kit.legacy). "
                f"Replace it in the script with {replacement}."
            )
        raise as_written(
            f"{display}.{name} is not provided by the legacy runner (tfest_kit.legacy): "
            f"neither its stand-ins nor tf.compat.v1 have it. "
            f"{provides}Replace it in the script with its TensorFlow 2 equivalent."
        )

    @property
    def __dict__(self) -> dict:  # type: ignore[override]
        """The namespace, holding every name the module serves, as TF 1.15's module did.

        Scripts read it to collect a package's classes (google/seq2seq: every
        ``tf.contrib.rnn.RNNCell`` subclass in ``tf.contrib.rnn.__dict__.values()``) or to
        look a name up (``tf.logging.__dict__['INFO']``); reading the namespace reads each
        served name, so each is reported as used.  Refused names and subpackages are left out
        (an attribute read still reaches them); ``tf``, ``tf.compat`` and ``tf.contrib`` (all
        of TensorFlow, or of contrib) stay as read so far.
        """
        namespace = _own(self)
        entries, display = namespace["__shim__"][1], namespace["__shim__"][5]
        whole = display in ("tf", "tf.compat", "tf.compat.v1", "tf.contrib")
        if not whole and not namespace.get("__complete__"):
            namespace["__complete__"] = True
            for name in dir(self):
                if name in entries and entries[name].hint is None:
                    continue
                try:
                    getattr(self, name)
                except AttributeError:
                    continue
        return namespace

    def __dir__(self) -> list[str]:
        entries, fallbacks = _own(self)["__shim__"][1:3]
        names = set(entries)
        for getter, _ in fallbacks:
            names.update(n for n in dir(getter()) if not n.startswith("_"))
        return sorted(names)

    def __repr__(self) -> str:
        return f"<tfest_kit.legacy stand-in for {_own(self)['__shim__'][5]!r}>"
