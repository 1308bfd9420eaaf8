"""What the legacy runner refuses of TF 1.15's ``tf.contrib``, and where a project reaches it.

TF 1.15's public ``tf.contrib`` names are in ``contrib_tf115.json`` beside this module
(:func:`tf115`).  A package or name TF 1.15 had that the runner does not serve is a
:class:`Refused`: reaching it works as it did (``import tensorflow.contrib.graph_editor as
ge``), its first use raises ``AttributeError`` naming its TensorFlow 2 home
(:data:`CONTRIB_REPLACEMENTS`, a served package's ``NOT_SERVED``) or saying there is none.
:func:`refused_in_project` lists, before a script runs, the refused names its project's files
reach (``--report``).

Example:

    ge = Refused("tf.contrib.graph_editor", None, Report())
    ge.connect      # AttributeError: … TensorFlow 2 has no equivalent of tf.contrib.graph_editor
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
from collections.abc import Sequence
from typing import Any, Callable, Optional

from tfest_kit.legacy._shim import MISSING, Entry, Report, ShimModule, as_written

__all__ = [
    "CONTRIB_REPLACEMENTS",
    "MOVED_TO_TF_DATA",
    "ITS_EQUIVALENT",
    "Refused",
    "tf115",
    "refused_module",
    "below_package",
    "refuse_the_rest",
    "refused_in_project",
]

# tf.contrib.<name> -> what to write instead, for every TF 1.15 package the runner does not serve
# (and gan, which left tf.contrib before 1.15); None: TensorFlow 2 has no equivalent.  Every
# `tf.…` named here is in tf.compat.v1 (checked by tests/test_legacy_contrib.py).
_TFP = "tensorflow-probability"
CONTRIB_REPLACEMENTS: dict[str, Optional[str]] = {
    "feature_column": "tf.feature_column",
    "saved_model": "tf.saved_model",
    "checkpoint": "tf.train.Checkpoint",
    "cudnn_rnn": "tf.keras.layers.LSTM / tf.keras.layers.GRU (cuDNN kernels on a GPU)",
    "distributions": f"{_TFP}'s tfp.distributions",
    "bayesflow": _TFP,
    "tensor_forest": "tensorflow-decision-forests",
    "gan": "tensorflow-gan",
    "quantize": "tensorflow-model-optimization (tfmot.quantization)",
    "model_pruning": "tensorflow-model-optimization (tfmot.sparsity)",
    "autograph": "tf.autograph",
    "batching": "tf.nondifferentiable_batch_function",
    "boosted_trees": "tensorflow-decision-forests (tfdf.keras.GradientBoostedTreesModel)",
    "constrained_optimization": "tensorflow-constrained-optimization",
    "deprecated": "tf.summary.scalar / tf.summary.histogram …",
    "eager": "TensorFlow 2 itself (eager by default), run without the legacy runner",
    "ffmpeg": "tensorflow-io (tfio.audio)",
    "integrate": f"{_TFP} (tfp.math.ode)",
    "kernel_methods": "Keras' RandomFourierFeatures layer (keras.layers.experimental)",
    "memory_stats": "tf.config.experimental.get_memory_info",
    "mixed_precision": "tf.mixed_precision",
    "nn": "tf.nn",
    "optimizer_v2": "tf.keras.optimizers",
    "proto": "tf.io.decode_proto / tf.io.encode_proto",
    "quantization": "tf.quantization",
    "resampler": "tensorflow-addons (tfa.image.resampler)",
    "sparsemax": "tensorflow-addons (tfa.activations.sparsemax)",
    "tensorboard": "the tensorboard package (tensorboard.plugins.projector)",
    "tfprof": "tf.profiler",
    "timeseries": f"{_TFP} (tfp.sts)",
    "cloud": "tensorflow-io (BigQuery, GCS)",
    "bigtable": "tensorflow-io (tfio.bigtable)",
    "kafka": "tensorflow-io (tfio.kafka)",
    "kinesis": "tensorflow-io (tfio.kinesis)",
    "ignite": "tensorflow-io (tfio.ignite)",
    "hadoop": "tensorflow-io",
    "libsvm": "tensorflow-io (tfio.experimental)",
    "tensorrt": "TF-TRT, in TensorFlow 2's GPU builds",
    "text": "tensorflow-text",
    "hooks": "tf.train.ProfilerHook and the other tf.train hooks",
    "input_pipeline": "tf.data",
    "all_reduce": "tf.distribute",
    "nccl": "tf.distribute.NcclAllReduce",
    **dict.fromkeys(
        (
            "copy_graph",
            "decision_trees",
            "fused_conv",
            "graph_editor",
            "grid_rnn",
            "labeled_tensor",
            "linear_optimizer",
            "meta_graph_transform",
            "mpi_collectives",
            "nearest_neighbor",
            "periodic_resample",
            "receptive_field",
            "recurrent",
            "reduce_slice_ops",
            "remote_fused_graph",
            "rpc",
            "solvers",
            "specs",
            "staging",
            "stat_summarizer",
            "testing",
        )
    ),
}
# What a served package's TF 1.15 name without a NOT_SERVED entry is replaced with.
ITS_EQUIVALENT = "its TensorFlow 2 equivalent"
# TF 1.2-1.3's tf.contrib.data datasets, which TF 1.4 moved to tf.data (TF 1.15's had none).
MOVED_TO_TF_DATA = {
    name: f"tf.data.{name} (TF 1.4 moved it there; TF 1.15's tf.contrib.data had none)"
    for name in ("Dataset", "TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset")
}
MOVED_TO_TF_DATA["Iterator"] = "tf.data.Iterator (TF 1.4 moved it there)"


@functools.cache
def tf115() -> dict[str, Any]:
    """TF 1.15's ``tf.contrib``: ``{"packages": [...], "names": {package: [name, ...]}}``.

    Read from ``contrib_tf115.json`` beside this module, which says where the lists come from
    (the TensorFlow 1.15 sources) and how they were taken.
    """
    with open(os.path.join(os.path.dirname(__file__), "contrib_tf115.json")) as f:
        return json.load(f)


class Refused:
    """A TF 1.15 ``tf.contrib`` module or name the runner does not serve: reached, not used.

    Reaching it works as it did on TF 1.15 (``import tensorflow.contrib.graph_editor as ge``,
    ``from tensorflow.contrib.learn import Experiment``, ``tf.contrib.graph_editor``), so a
    script that keeps it behind a flag that is off runs.  Its first use (an attribute, a call,
    a subclass) raises ``AttributeError`` naming its TensorFlow 2 home, or saying plainly that
    there is none.  Reaching it records it in the report as not provided.

    Args:
      name: e.g. ``"tf.contrib.graph_editor"``.
      replacement: what to write instead; ``None`` when TensorFlow 2 has no equivalent.
      report: where it is recorded.
    """

    def __init__(self, name: str, replacement: Optional[str], report: Report) -> None:
        # Set through __dict__: no attribute of a TensorFlow name may be shadowed.
        self.__dict__.update(_name=name, _replacement=replacement, _report=report)
        report.add(name, MISSING, replacement or "none in TensorFlow 2")

    def child(self, name: str) -> Refused:
        """The refused ``<name>`` inside this module (``import …graph_editor.util``)."""
        return Refused(f"{self._name}.{name}", self._replacement, self._report)

    def error(self, used: str) -> AttributeError:
        """The error for a use of this name, ``used`` being what the script wrote."""
        message = f"{used} is not provided by the legacy runner (tfest_kit.legacy)"
        if self._replacement is None:
            return as_written(
                f"{message}: TensorFlow 2 has no equivalent of {self._name}, in TensorFlow or on "
                "PyPI. Remove its use from the script (the script runs as long as it does not "
                "use it), or run the script on TensorFlow 1.15."
            )
        return as_written(f"{message}. Replace it in the script with {self._replacement}.")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and inspect probing for protocols
            raise AttributeError(name)
        raise self.error(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error(self._name)

    def __mro_entries__(self, bases: tuple) -> tuple:
        raise self.error(self._name)

    def __repr__(self) -> str:
        return f"<{self._name}: not served by tfest_kit.legacy>"


def refused_module(display: str, report: Report) -> Refused:
    """A TF 1.15 implementation module below a ``tf.contrib`` package (``….python.tpu.x``).

    Args:
      display: e.g. ``"tf.contrib.learn.python.learn.estimators"``.
      report: where it is recorded.
    """
    package = display.split(".")[2]
    if package in CONTRIB_REPLACEMENTS:
        return Refused(display, CONTRIB_REPLACEMENTS[package], report)
    try:
        module = importlib.import_module(f"tfest_kit.legacy.contrib.{package}")
    except ModuleNotFoundError:  # tf.contrib.data, slim …: no module of ours
        module = None
    return Refused(display, getattr(module, "OTHERS", ITS_EQUIVALENT), report)


def below_package(name: str, module_path: bool) -> bool:
    """Whether an import of ``name`` the stand-in lacks is one of TF 1.15's inner modules.

    ``tf.contrib.<package>.python…`` and the like are implementation modules no list names
    (``from tensorflow.contrib.tpu.python.tpu import tpu_feed``): such an import succeeds and
    gives a :class:`Refused`.  A name right below a package (``from tensorflow.contrib.layers
    import foo``) must be one of TF 1.15's, else the import fails at once.

    Args:
      name: e.g. ``"tf.contrib.learn.python"``.
      module_path: ``name`` is the module path of the import, not a name imported from one.
    """
    parts = name.split(".")
    return parts[:2] == ["tf", "contrib"] and len(parts) >= (4 if module_path else 5)


def refuse_the_rest(
    key: str,
    display: str,
    entries: dict[str, Entry],
    fallbacks: Sequence[tuple[Callable[[], Any], str]],
    report: Report,
    replacements: Optional[dict[str, str]] = None,
    others: str = ITS_EQUIVALENT,
) -> None:
    """Adds to ``entries`` a :class:`Refused` for each TF 1.15 name of ``key`` not served.

    A name is served when ``entries`` or a fallback module has it; the others (and the names
    ``replacements`` lists) are refused with their replacement, else ``others``.
    """
    replacements = replacements or {}
    served = set(entries)
    for getter, _ in fallbacks:
        served.update(dir(getter()))
    for name in sorted(set(tf115()["names"].get(key, ())).union(replacements) - served):
        text = replacements.get(name, others)
        entries[name] = Entry(
            lambda name=name, text=text: Refused(f"{display}.{name}", text, report), None
        )


# Directories a project scan never enters: installed packages, caches, hidden (.git, .venv).
_NOT_PROJECT = frozenset({"site-packages", "dist-packages", "__pycache__", "node_modules"})
_MAX_FILES = 2000


def _project_files(directory: str) -> list[str]:
    files = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _NOT_PROJECT)
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".py")]
        if len(files) >= _MAX_FILES:
            return files[:_MAX_FILES]
    return files


def _tf_name(module: str) -> str:
    # tensorflow.contrib.x -> tf.contrib.x; tensorflow.compat.v1 is the stand-in itself: tf.
    name = "tf" + module[len("tensorflow") :]
    return "tf" + name[len("tf.compat.v1") :] if name.startswith("tf.compat.v1") else name


def _contrib_references(tree: ast.AST) -> list[tuple[str, int, int]]:
    """``(tf.contrib.…, line, parts)`` for each import of and attribute chain into ``tf.contrib``.

    ``parts``: how many leading parts of the name an import names as a module path (0 for an
    attribute chain).
    """
    aliases: dict[str, str] = {}  # a local name bound to the stand-in or a tf.contrib module
    references = []
    chains = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.partition(".")[0] != "tensorflow":
                    continue
                name = _tf_name(alias.name)
                if name.startswith("tf.contrib."):
                    references.append((name, node.lineno, name.count(".") + 1))
                if alias.asname is None:
                    aliases["tensorflow"] = "tf"
                elif name == "tf" or name.startswith("tf.contrib"):
                    aliases[alias.asname] = name
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.partition(".")[0] != "tensorflow":
                continue
            for alias in node.names:
                name = _tf_name(f"{node.module}.{alias.name}")
                if alias.name == "*" or not (name == "tf" or name.startswith("tf.contrib")):
                    continue
                if name.startswith("tf.contrib."):
                    references.append((name, node.lineno, name.count(".")))
                aliases[alias.asname or alias.name] = name
        elif isinstance(node, ast.Attribute):
            chains.append(node)
    for node in chains:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in aliases:
            name = ".".join([aliases[node.id], *reversed(parts)])
            if name.startswith("tf.contrib."):
                references.append((name, node.lineno, 0))
    return sorted(references, key=lambda reference: reference[1])


def _first_refused(contrib: ShimModule, name: str, module_parts: int) -> Optional[tuple[str, str]]:
    """``(name, replacement)`` of the first refused or unknown part of ``tf.contrib.…`` ``name``.

    As the import does (see :func:`below_package`) for the ``module_parts`` first parts that an
    import names as a module path and for the name imported from it.
    """
    value: Any = contrib
    reached = "tf.contrib"
    for index, part in enumerate(name.split(".")[2:], start=3):
        if isinstance(value, Refused):
            break
        if not isinstance(value, ShimModule):
            return None  # a served function or class: its attributes are its own
        try:
            value = getattr(value, part)
        except AttributeError:
            imported = module_parts and index <= module_parts + 1
            if imported and below_package(f"{reached}.{part}", index <= module_parts):
                value = refused_module(f"{reached}.{part}", Report())
                break
            return f"{reached}.{part}", "not a name TF 1.15 had"
        reached = f"{reached}.{part}"
    if isinstance(value, Refused):
        return value._name, value._replacement or "none in TensorFlow 2"
    return None


def refused_in_project(directory: str, contrib: ShimModule) -> list[tuple[str, str, str]]:
    """The ``tf.contrib`` modules and names a project's code reaches that the runner refuses.

    A static scan, before anything runs: every ``.py`` file under ``directory`` (not in hidden,
    ``site-packages`` or ``__pycache__`` directories; at most 2,000 files) is parsed for
    ``import tensorflow.contrib.…``, ``from tensorflow.contrib… import …`` and attribute chains
    ``tf.contrib.…`` on a name that file binds to ``tensorflow`` or to a ``tf.contrib`` module.

    Args:
      directory: the project's directory (the script's).
      contrib: a ``tf.contrib`` stand-in to look the names up in
        (:func:`tfest_kit.legacy._contrib.build_contrib` with a report of its own).

    Returns:
      ``(name, where, replacement)`` for each refused name, or name TF 1.15 did not have, in the
      order found: ``("tf.contrib.graph_editor", "model.py:3", "none in TensorFlow 2")``.
    """
    first: dict[tuple[str, int], str] = {}
    for path in _project_files(directory):
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue  # not Python 3 source: the script would not import it either
        for name, line, module_parts in _contrib_references(tree):
            where = f"{os.path.relpath(path, directory)}:{line}"
            first.setdefault((name, module_parts), where)
    refused: dict[str, tuple[str, str]] = {}
    for (name, module_parts), where in first.items():
        found = _first_refused(contrib, name, module_parts)
        if found is not None:
            refused.setdefault(found[0], (where, found[1]))
    return [(name, where, replacement) for name, (where, replacement) in refused.items()]
