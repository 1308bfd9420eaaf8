"""``Predictor``: load an exported SavedModel once, then answer many calls fast.

The SavedModel is loaded into its own ``tf.compat.v1.Graph`` and ``Session`` and each call runs
one prepared session callable (a single C++ call): no graph rebuild or checkpoint restore per
call (as ``estimator.predict`` does) and no eager dispatch per call (as a TF2 signature
function does).
See :mod:`tfest_kit.serving`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np
from google.protobuf import message, text_format

from tfest_kit._checks import check_int
from tfest_kit._errors import TfestKitError
from tfest_kit._model_dir import ExportNotFoundError, latest_export
from tfest_kit._tf import CallableOptions, SavedModel, tf, tf2

__all__ = ["ExportLoadError", "Predictor", "PredictorInputError", "read_signatures"]

# The SignatureDef proto class, through the public function that builds one.
SignatureDef = type(tf.saved_model.build_signature_def())


class PredictorInputError(TfestKitError, ValueError):
    """Features given to a :class:`Predictor` do not match its signature."""


class ExportLoadError(TfestKitError, OSError):
    """An export exists but cannot be loaded: a corrupt or truncated SavedModel."""


def _first_cause(error: Exception) -> str:
    """The line of a TensorFlow error that says what went wrong (not "Graph execution error")."""
    text = getattr(error, "message", None) or str(error)
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Graph execution error", "Detected at", "Node:", "[[")):
            return line
    return type(error).__name__


def _resolve_export_dir(path: str) -> str:
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"`export_dir_or_base` must be a path. Got: {path!r}")
    # Estimator.export_saved_model returns the export's path as bytes.
    path = os.fsdecode(path)
    try:
        if tf.gfile.Exists(os.path.join(path, "saved_model.pb")) or tf.gfile.Exists(
            os.path.join(path, "saved_model.pbtxt")
        ):
            return path
    except tf.errors.OpError as e:  # a remote path without network or credentials, say
        raise ExportLoadError(f"Cannot read {path!r}: {_first_cause(e)}") from e
    try:
        return latest_export(path)
    except ExportNotFoundError as e:
        raise ExportNotFoundError(
            f"{path!r} is neither a SavedModel directory nor a directory of exports. {e}"
        ) from e


def _spec(info) -> tf2.TypeSpec:
    """The ``TypeSpec`` of a signature input or output, with a ``name`` saying what to feed.

    A ``SparseTensor`` (or ``RaggedTensor``) in a signature has no tensor name of its own, only
    component tensors. A ``SparseTensor`` is described as a ``tf.SparseTensorSpec`` whose
    ``name`` lists them, not as a dense tensor named ``""``; any other composite (a
    ``RaggedTensor``) as a spec of unknown shape named after its type and components.
    """
    encoding = info.WhichOneof("encoding")
    if encoding == "coo_sparse":
        sparse = info.coo_sparse
        spec = tf2.SparseTensorSpec(_shape(info), tf.as_dtype(info.dtype))
        # An attribute, not a subclass: the spec stays equal to a user's tf.SparseTensorSpec.
        spec.name = (
            f"SparseTensor(indices={sparse.indices_tensor_name}, "
            f"values={sparse.values_tensor_name}, "
            f"dense_shape={sparse.dense_shape_tensor_name})"
        )
        return spec
    if encoding == "composite_tensor":
        # A RaggedTensor, say: its TypeSpec is only decoded by TensorFlow internals, so it is
        # described by its components' dtype and names (and cannot be fed either).
        composite = info.composite_tensor
        kind = composite.type_spec.type_spec_class_name.removesuffix("Spec") or "CompositeTensor"
        names = ", ".join(c.name for c in composite.components)
        dtype = tf.as_dtype(composite.components[0].dtype) if composite.components else tf.string
        return tf2.TensorSpec(None, dtype, name=f"{kind}({names})")
    return tf2.TensorSpec(_shape(info), tf.as_dtype(info.dtype), name=info.name)


def _shape(info) -> Optional[list]:
    if info.tensor_shape.unknown_rank:
        return None
    return [None if d.size < 0 else d.size for d in info.tensor_shape.dim]


def _is_dense(info) -> bool:
    """Whether a signature input is one tensor that can be fed (not a SparseTensor, say)."""
    return info.WhichOneof("encoding") == "name"


def _signature_specs(signature_defs) -> dict[str, dict]:
    return {
        name: {
            "method": sig.method_name,
            "inputs": {k: _spec(v) for k, v in sorted(sig.inputs.items())},
            "outputs": {k: _spec(v) for k, v in sorted(sig.outputs.items())},
        }
        for name, sig in sorted(signature_defs.items())
    }


def read_signatures(
    export_dir_or_base: str, tags: Sequence[str] = ("serve",)
) -> tuple[str, dict[str, dict]]:
    """Reads every signature of an export without choosing one.

    Only ``saved_model.pb`` is read, not the variables, so this is quick on a large export.

    Args:
      export_dir_or_base: an export or a directory of exports (the newest complete one is used).
      tags: the MetaGraph tags to read.

    Returns:
      ``(export_dir, {name: {"method": str, "inputs": {name: TensorSpec}, "outputs": {...}}})``;
      a sparse input is a ``tf.SparseTensorSpec`` whose ``name`` lists its component tensors.

    Raises:
      ExportNotFoundError: if there is no complete export.
      ExportLoadError: if ``saved_model.pb`` cannot be read or parsed.
      ValueError: if the export has no MetaGraph with exactly ``tags``.

    Example:

        export_dir, signatures = read_signatures("model_dir/export/best")
    """
    export_dir = _resolve_export_dir(export_dir_or_base)
    meta_graph = _meta_graph(export_dir, tags)
    return export_dir, _signature_specs(meta_graph.signature_def)


def _meta_graph(export_dir: str, tags: Sequence[str]):
    saved_model = SavedModel()
    binary = os.path.join(export_dir, "saved_model.pb")
    path = binary if tf.gfile.Exists(binary) else os.path.join(export_dir, "saved_model.pbtxt")
    try:
        with tf.gfile.GFile(path, "rb") as f:
            data = f.read()
        if path == binary:
            saved_model.ParseFromString(data)
        else:
            text_format.Parse(data.decode("utf-8"), saved_model)
    except (OSError, tf.errors.OpError, message.DecodeError, text_format.ParseError) as e:
        raise ExportLoadError(
            f"The SavedModel at {export_dir} could not be read: {os.path.basename(path)} is "
            "corrupt or incomplete. Export the model again or use another export. "
            f"Got: {type(e).__name__}: {_first_cause(e)}"
        ) from e
    for meta_graph in saved_model.meta_graphs:
        if set(meta_graph.meta_info_def.tags) == set(tags):
            return meta_graph
    found = [sorted(m.meta_info_def.tags) for m in saved_model.meta_graphs]
    raise ValueError(
        f"The SavedModel at {export_dir} has no MetaGraph tagged {sorted(tags)}. "
        f"Pass the tags of one it has: {found}"
    )


def _describe(name: str, spec: tf2.TypeSpec) -> str:
    shape = "unknown" if spec.shape.rank is None else str(spec.shape.as_list())
    kind = "" if isinstance(spec, tf2.TensorSpec) else f" ({type(spec).__name__})"
    return f"{name}: {spec.dtype.name} {shape}{kind}"


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(type(value).__name__)


def _convert(name: str, value: Any, spec: tf2.TensorSpec, where: str) -> np.ndarray:
    """Converts one input to the signature's dtype, or raises saying what was expected."""
    dtype = spec.dtype
    expected = f"signature {where} expects {_describe(name, spec)}"
    if dtype == tf.string:
        array = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
        if array.dtype.kind not in "USO":
            raise TypeError(
                f"Input {name!r} must hold strings or bytes; {expected}. Got dtype {array.dtype}"
            )
        try:
            array = np.vectorize(_to_bytes, otypes=[object])(array) if array.size else array
        except TypeError as e:
            raise TypeError(
                f"Input {name!r} must hold strings or bytes; {expected}. Got an element of "
                f"type {e}"
            ) from e
        array = array.astype(object)
    else:
        try:
            array = np.asarray(value)
        except ValueError as e:  # NumPy: "setting an array element with a sequence…"
            raise PredictorInputError(
                f"Input {name!r} is ragged (its rows differ in length); {expected}: pad or cut "
                f"every row to the same length. Got: {_short(value)}"
            ) from e
        target = np.dtype(dtype.as_numpy_dtype)
        kind = array.dtype.kind
        allowed = {"f": "fiu", "c": "fiuc", "i": "iu", "u": "iu", "b": "b"}.get(target.kind, "")
        # No values, nothing to convert unsafely: [] is float64 to NumPy, whatever it stands for.
        if kind not in allowed and array.size:
            raise TypeError(
                f"Input {name!r} has dtype {array.dtype}, which cannot be safely converted; "
                f"{expected}. Got: {_short(value)}"
            )
        # Same dtype cannot overflow: skip the min/max scans (they cost ~10 us per input per call).
        if target.kind in "iu" and array.dtype != target and array.size:
            info = np.iinfo(target)
            if array.min() < info.min or array.max() > info.max:
                raise _range_error(f"Input {name!r}", target, array, expected)
        if target.kind == "f" and array.dtype != target:
            with np.errstate(over="ignore"):  # refused below, with the input's name
                converted = array.astype(target)
        else:
            converted = array.astype(target, copy=False)
        if _overflowed(array, converted):
            raise _range_error(f"Input {name!r}", target, array, expected)
        array = converted
    if spec.shape.rank is not None:
        want = spec.shape.as_list()
        if array.ndim != len(want) or any(
            w is not None and w != g for w, g in zip(want, array.shape)
        ):
            hint = (
                " (add the batch dimension: wrap one example in a list)"
                if (array.ndim == len(want) - 1)
                else ""
            )
            raise PredictorInputError(
                f"Input {name!r} has shape {list(array.shape)}; {expected} (None = any size)"
                f"{hint}"
            )
    return array


def _overflowed(array: np.ndarray, converted: np.ndarray) -> bool:
    """Whether finite values became inf in a float conversion (1e300 as float32, say).

    Only a conversion that made an inf is checked further, so the common case costs one scan.
    """
    if converted.dtype.kind != "f" or array.dtype == converted.dtype or not array.size:
        return False
    if not np.isinf(converted).any():
        return False
    return bool((np.isinf(converted) & np.isfinite(array.astype(np.float64))).any())


def _range_error(what: str, target: np.dtype, array: np.ndarray, expected: str):
    """The PredictorInputError for values that ``target`` cannot hold."""
    if array.dtype.kind == "f":
        array = array[np.isfinite(array)]  # inf and nan are not what is out of range
    return PredictorInputError(
        f"{what} has values outside the {target} range; {expected}. "
        f"Got: values from {array.min()} to {array.max()}"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_single_value(value: Any) -> bool:
    """Whether ``value`` is one value rather than one entry per example.

    Not ``np.ndim``: the entries of a multi-valued (``VarLenFeature``) feature differ in length,
    and NumPy refuses to make an array of such a list.
    """
    if isinstance(value, (str, bytes)):
        return True
    if isinstance(value, np.ndarray):
        return value.ndim == 0
    return not hasattr(value, "__len__")


class _ExampleBuilder:
    """Serializes plain feature dicts into ``tf.train.Example``s for a parsing signature."""

    def __init__(
        self, keys: dict[str, tf2.DType], required: set[str], shapes: dict[str, list[int]]
    ):
        self.keys = keys
        self.required = required
        self.shapes = shapes  # of the dense features: each example holds exactly this many

    @classmethod
    def find(cls, session, graph, input_tensor) -> Optional[_ExampleBuilder]:
        for op in input_tensor.consumers():
            if op.type == "ParseExampleV2":
                # Inputs: serialized, names, sparse_keys, dense_keys, ragged_keys (each one
                # string tensor), dense_defaults[Ndense].
                sparse, dense, ragged = session.run(list(op.inputs[2:5]))
                defaults = op.inputs[5 : 5 + len(dense)]
                ragged_types = op.get_attr("ragged_value_types")
            elif op.type == "ParseExample":
                # The v1 op of older exports: one scalar input per key. Inputs: serialized,
                # names, sparse_keys[Nsparse], dense_keys[Ndense], dense_defaults[Ndense].
                num_sparse, num_dense = op.get_attr("Nsparse"), op.get_attr("Ndense")
                keys_end = 2 + num_sparse + num_dense
                sparse = session.run(list(op.inputs[2 : 2 + num_sparse]))
                dense = session.run(list(op.inputs[2 + num_sparse : keys_end]))
                defaults = op.inputs[keys_end : keys_end + num_dense]
                ragged, ragged_types = [], []
            else:
                continue
            keys = {}
            for k, t in zip(sparse, op.get_attr("sparse_types")):
                keys[k.decode()] = tf.as_dtype(t)
            for k, t in zip(ragged, ragged_types):
                keys[k.decode()] = tf.as_dtype(t)
            required = set()
            shapes = {}
            dense_shapes = op.get_attr("dense_shapes")
            for k, t, d, shape in zip(dense, op.get_attr("Tdense"), defaults, dense_shapes):
                keys[k.decode()] = tf.as_dtype(t)
                if d.shape.num_elements() == 0:
                    required.add(k.decode())
                shape = tf.TensorShape(shape)
                if shape.is_fully_defined():
                    shapes[k.decode()] = shape.as_list()
            return cls(keys, required, shapes)
        return None

    def build(self, features: Mapping, where: str) -> np.ndarray:
        unknown = sorted(set(features) - set(self.keys))
        missing = sorted(self.required - set(features))
        if unknown or missing:
            raise PredictorInputError(
                f"Signature {where} parses tf.train.Examples with features "
                f"{sorted(self.keys)} (required: {sorted(self.required)}). "
                f"Got unknown: {unknown}, missing: {missing}"
            )
        for key, values in features.items():
            if _is_single_value(values):
                raise PredictorInputError(
                    f"Feature {key!r} must hold one entry per example: wrap one example's "
                    f"value in a list. Got: {_short(values)}"
                )
        lengths = {k: len(v) for k, v in features.items()}
        if len(set(lengths.values())) > 1:
            raise PredictorInputError(
                f"All features must hold the same number of examples. Got: {lengths}"
            )
        count = next(iter(lengths.values()), 0)
        serialized = np.empty([count], dtype=object)
        for i in range(count):
            example = tf.train.Example()
            for key, values in features.items():
                self._fill(example, key, values[i], i)
            serialized[i] = example.SerializeToString()
        return serialized

    def _fill(self, example, key: str, value: Any, index: int) -> None:
        dtype = self.keys[key]
        try:
            flat = np.asarray(value, dtype=object if dtype == tf.string else None).ravel()
        except ValueError as e:  # NumPy: "setting an array element with a sequence…"
            raise PredictorInputError(
                f"Feature {key!r} of example {index} is nested unevenly: give each example a "
                f"flat list of values (or an array of the parsed shape). Got: {_short(value)}"
            ) from e
        shape = self.shapes.get(key)
        if shape is not None and not flat.size and key not in self.required:
            # No values for a feature parsed with a default: left out of the example, so that
            # the parser gives the default (a present but empty feature is an error to it).
            return
        feature = example.features.feature[key]
        if shape is not None and flat.size != int(np.prod(shape)):
            raise PredictorInputError(
                f"Feature {key!r} is parsed with shape {shape}, but example {index} holds "
                f"{flat.size} value(s): give one entry per example (wrap one example in a "
                f"list). Got: {_short(value)}"
            )
        # A tf.train.Example holds floats as float32 and integers as int64: a value they
        # cannot hold would be stored as inf or wrapped around, not refused.
        what = f"Feature {key!r} of example {index}"
        expected = f"it is parsed as {dtype.name}"
        try:
            if dtype == tf.string:
                feature.bytes_list.value.extend(_to_bytes(v) for v in flat)
            elif dtype.is_floating:
                with np.errstate(over="ignore"):  # refused below, with the feature's name
                    converted = flat.astype(np.float32)
                if flat.dtype.kind in "iuf" and _overflowed(flat, converted):
                    raise _range_error(what, np.dtype(np.float32), flat, expected)
                feature.float_list.value.extend(converted.tolist())
            else:
                # An example without values ([] of a VarLenFeature) is float64 to NumPy.
                if flat.size and flat.dtype.kind not in "iub":
                    raise TypeError(flat.dtype)
                if flat.size and flat.dtype.kind == "u" and flat.max() > np.iinfo(np.int64).max:
                    raise _range_error(what, np.dtype(np.int64), flat, expected)
                feature.int64_list.value.extend(flat.astype(np.int64).tolist())
        except (TypeError, ValueError) as e:
            if isinstance(e, PredictorInputError):
                raise
            raise TypeError(
                f"Feature {key!r} is parsed as {dtype.name}; cannot store {_short(value)} in a "
                f"tf.train.Example ({e})"
            ) from e


class Predictor:
    """Serves an exported SavedModel from Python: load once, call many times.

    Replaces the removed ``tf.contrib.predictor``. Inputs are checked against the signature
    (names, dtypes, shapes) and converted to its dtypes when that is safe (float64 -> float32,
    int64 -> int32 within range); an error names the input and what it expected. A signature
    that parses serialized ``tf.train.Example``s (:func:`parsing_receiver`, or the v1
    ``ParseExample`` op of older exports) also takes plain feature dicts, a multi-valued
    feature as a list of values per example (an empty list gives a feature's default). Large
    inputs run in batches of ``batch_size``; a rank-0 input (a threshold) goes whole to each.
    An input the outputs do not depend on (``label_ids`` of a BERT receiver) may be left out.
    A signature with a ``SparseTensor`` input loads but cannot be called (export with
    :func:`parsing_receiver` instead).

    Args:
      export_dir_or_base: an export (``.../1712345678``) or a directory of exports, in which
        case the newest complete one is used (:func:`latest_export`); ``str``, ``bytes`` (what
        ``export_saved_model`` returns) or ``os.PathLike``.
      signature: the name of the signature to serve, or a ``SignatureDef`` proto naming
        tensors of the export's graph (a ``TensorInfo`` with only a ``name`` gets its dtype and
        shape from the graph), as ``tf.contrib.predictor`` took one.
      batch_size: default largest batch per session run.
      tags: the MetaGraph tags to load.
      session_config: an optional ``tf.compat.v1.ConfigProto``. Default: ops run in the
        calling thread (``inter_op_parallelism_threads=-1``, this session only), which saves a
        thread hand-off per op at batch 1; large ops still use the intra-op thread pool. For
        the lowest batch-1 latency on few cores pass ``intra_op_parallelism_threads=1``, but
        TensorFlow shares that pool process-wide and fixes its size when the first session or
        eager context starts, so it also slows large batches and later training in the process.
      graph: the ``tf.compat.v1.Graph`` to load the export into; default a new one.

    Raises:
      ExportNotFoundError: if there is no complete export.
      ExportLoadError: (a ``TfestKitError`` and ``OSError``) if the export is corrupt.
      ValueError: if ``signature`` is not in the SavedModel (the message lists the names).

    Example:

        predictor = Predictor(os.path.join(model_dir, "export", "best"))
        predictor({"x": [[1.0, 2.0, 3.0, 4.0]]})["probabilities"]
    """

    def __init__(
        self,
        export_dir_or_base: str,
        signature: Union[str, SignatureDef] = "serving_default",
        *,
        batch_size: int = 1024,
        tags: Sequence[str] = ("serve",),
        session_config: Optional[Any] = None,
        graph: Optional[Any] = None,
    ):
        self._batch_size = check_int("batch_size", batch_size)
        self.export_dir = _resolve_export_dir(export_dir_or_base)
        self._graph = tf.Graph() if graph is None else graph
        if session_config is None:
            session_config = _default_session_config()
        self._session = tf.Session(graph=self._graph, config=session_config)
        try:
            self._load(list(tags), signature)
        except Exception:
            self._session.close()
            raise

    def _load(self, tags: list[str], signature: Union[str, SignatureDef]) -> None:
        # The loader's RuntimeError for missing tags does not say which ones the export has.
        _meta_graph(self.export_dir, tags)
        try:
            with self._graph.as_default():
                meta_graph = tf.saved_model.loader.load(self._session, tags, self.export_dir)
        except (OSError, tf.errors.OpError) as e:
            # TensorFlow reports a truncated file as "Graph execution error" from RestoreV2.
            raise ExportLoadError(
                f"The SavedModel at {self.export_dir} could not be loaded: it is corrupt or "
                "incomplete (saved_model.pb and variables/ must come from one complete "
                "export_saved_model call). Export the model again or use another export. "
                f"Got: {type(e).__name__}: {_first_cause(e)}"
            ) from e
        self._signature_defs = dict(meta_graph.signature_def)
        if isinstance(signature, SignatureDef):
            sig = self._completed(signature)
            signature = "<the SignatureDef given>"
        elif signature not in self._signature_defs:
            raise ValueError(
                f"`signature` {signature!r} is not in {self.export_dir}. "
                # TF2's "__saved_model_init_op" is a signature only in name: it runs no model.
                f"Available signatures: "
                f"{sorted(k for k in self._signature_defs if k != '__saved_model_init_op')}"
            )
        else:
            sig = self._signature_defs[signature]
        self.signature = signature
        self._inputs = {k: _spec(v) for k, v in sorted(sig.inputs.items())}
        self._outputs = {k: _spec(v) for k, v in sorted(sig.outputs.items())}
        self._input_names = list(self._inputs)
        self._output_names = list(self._outputs)
        self._where = f"{signature!r} of {self.export_dir}"
        self._examples = None
        # A SparseTensor input is fed through several component tensors, not one; it is refused
        # when called (prepare), so that the export's signatures can still be inspected here.
        self._sig = sig
        self._unfeedable = [k for k in self._input_names if not _is_dense(sig.inputs[k])]
        if self._unfeedable:
            self._run = None
            return
        # Callables for calls that leave out inputs the outputs do not depend on, by the set of
        # inputs given; built on first use (see _runner_for).
        self._subset_runs: dict[frozenset, tuple[Callable, list[str]]] = {}
        self._needed: Optional[frozenset] = None
        self._run = self._make_run(self._input_names)
        feed = self._graph.get_tensor_by_name(sig.inputs[self._input_names[0]].name)
        if len(self._input_names) == 1 and self._inputs[self._input_names[0]].dtype == tf.string:
            self._examples = _ExampleBuilder.find(self._session, self._graph, feed)

    def _completed(self, signature: SignatureDef) -> SignatureDef:
        """``signature`` with each tensor's dtype and shape read from the loaded graph."""
        full = SignatureDef()
        full.CopyFrom(signature)
        for infos in (full.inputs, full.outputs):
            for key, info in infos.items():
                try:
                    tensor = self._graph.get_tensor_by_name(info.name)
                except (KeyError, ValueError) as e:
                    raise ValueError(
                        f"`signature` names tensor {info.name!r} for {key!r}, which the graph of "
                        f"{self.export_dir} does not have: name a tensor as 'op_name:0'. "
                        f"Got: {e}"
                    ) from e
                with self._graph.as_default():  # build_tensor_info refuses eager mode
                    info.CopyFrom(tf.saved_model.utils.build_tensor_info(tensor))
        return full

    def _make_run(self, input_names: list[str]) -> Callable:
        """``run(*arrays of input_names) -> [every output]``: one session callable."""
        sig = self._sig
        feed_names = [sig.inputs[k].name for k in input_names]
        # An output may be an input passed through (instance keys: predictions={"id":
        # features["id"]}). A session callable refuses to feed and fetch one tensor, so such
        # outputs are answered from the fed arrays, as Session.run would answer them.
        sources = [
            ("input", feed_names.index(sig.outputs[k].name))
            if sig.outputs[k].name in feed_names
            else ("fetch", None)
            for k in self._output_names
        ]
        fetch_names = [
            sig.outputs[k].name
            for k, (kind, _) in zip(self._output_names, sources)
            if kind == "fetch"
        ]
        feeds = [self._graph.get_tensor_by_name(name) for name in feed_names]
        fetches = [self._graph.get_tensor_by_name(name) for name in fetch_names]
        fetch = _session_callable(self._session, feeds, fetches)
        if not any(kind == "input" for kind, _ in sources):
            return fetch

        def run_passing_inputs(*values: np.ndarray) -> list:
            fetched = iter(fetch(*values))
            return [values[i] if kind == "input" else next(fetched) for kind, i in sources]

        return run_passing_inputs

    def _needed_inputs(self) -> frozenset:
        """The inputs the outputs depend on; computed once, on the first call that omits one.

        An input fed through a ``placeholder_with_default`` is never needed: the session uses
        its default, as ``tf.contrib.predictor`` let it.
        """
        if self._needed is None:
            by_tensor = {self._sig.inputs[k].name: k for k in self._input_names}
            needed = set()
            pending = [
                self._graph.get_tensor_by_name(self._sig.outputs[k].name).op
                for k in self._output_names
            ]
            for k in self._output_names:
                if self._sig.outputs[k].name in by_tensor:
                    needed.add(by_tensor[self._sig.outputs[k].name])
            seen = set()
            while pending:
                op = pending.pop()
                if op.name in seen:
                    continue
                seen.add(op.name)
                for tensor in op.inputs:
                    if tensor.name in by_tensor:
                        needed.add(by_tensor[tensor.name])
                    pending.append(tensor.op)
                pending.extend(op.control_inputs)
            self._needed = frozenset(
                k
                for k in needed
                if self._graph.get_tensor_by_name(self._sig.inputs[k].name).op.type
                != "PlaceholderWithDefault"
            )
        return self._needed

    def _runner_for(self, given: frozenset) -> tuple[Callable, list[str]]:
        """The callable and input order for a call that gives only the inputs ``given``."""
        cached = self._subset_runs.get(given)
        if cached is None:
            names = [k for k in self._input_names if k in given]
            cached = self._subset_runs[given] = (self._make_run(names), names)
        return cached

    @property
    def signature_names(self) -> list[str]:
        """Names of all signatures in the loaded MetaGraph."""
        return sorted(self._signature_defs)

    @property
    def inputs(self) -> dict[str, tf2.TypeSpec]:
        """Input name -> ``tf.TensorSpec`` (``None`` for a dimension of any size).

        A sparse input is a ``tf.SparseTensorSpec`` whose ``name`` lists its component tensors.
        """
        return dict(self._inputs)

    @property
    def outputs(self) -> dict[str, tf2.TensorSpec]:
        """Output name -> ``tf.TensorSpec``."""
        return dict(self._outputs)

    @property
    def parses_examples(self) -> bool:
        """Whether the signature takes serialized ``tf.train.Example``s."""
        return self._examples is not None

    @property
    def example_features(self) -> Optional[dict[str, tf2.DType]]:
        """For a parsing signature, the features it reads from each example, by name.

        Those are the names a plain feature dict passes instead of serialized examples;
        ``None`` for a signature that takes no ``tf.train.Example`` protos.
        """
        return None if self._examples is None else dict(self._examples.keys)

    def signatures(self) -> dict[str, dict]:
        """Every signature: ``{name: {"method": str, "inputs": {...}, "outputs": {...}}}``."""
        return _signature_specs(self._signature_defs)

    def prepare(self, features: Mapping) -> dict[str, np.ndarray]:
        """Checks and converts ``features`` into the arrays fed to the signature's inputs.

        Args:
          features: input name -> array-like with a leading batch dimension; for a parsing
            signature, alternatively feature name -> per-example values.

        An input the signature's outputs do not depend on (a ``label_ids`` placeholder in a
        BERT serving receiver), or one with a default (``placeholder_with_default``), may be
        left out, as ``tf.contrib.predictor`` allowed; it is then not fed.

        Returns:
          Input name -> NumPy array of the signature's dtype, for the inputs given.

        Raises:
          PredictorInputError: (a ``ValueError``) for an unknown input name, a missing one
            that the outputs depend on, a wrong
            shape, ragged rows, numbers outside the range of the input's dtype (or of a
            tf.train.Example's int64 / float32), inputs with different batch sizes, or a
            signature with a sparse input.
          TypeError: if ``features`` is not a dict or a value cannot be converted to the
            input's dtype.
        """
        if not isinstance(features, Mapping):
            raise TypeError(
                f"`features` must be a dict of input name -> values; signature {self._where} "
                f"has inputs {self._describe_inputs()}. Got: {_short(features)}"
            )
        if self._unfeedable:
            raise PredictorInputError(self._unfeedable_message())
        if self._examples is not None and set(features) != set(self._input_names):
            features = {self._input_names[0]: self._examples.build(features, self._where)}
        given = features.keys()
        if len(given) != len(self._input_names) or any(k not in self._inputs for k in given):
            missing = sorted(set(self._input_names) - set(given))
            unknown = sorted(set(given) - set(self._input_names))
            if unknown or set(missing) & self._needed_inputs():
                needed = sorted(set(missing) & self._needed_inputs())
                raise PredictorInputError(
                    f"Signature {self._where} has inputs {self._describe_inputs()}. "
                    f"Got missing: {missing}, unknown: {unknown}"
                    + (f" (the outputs depend on {needed})" if needed and not unknown else "")
                )
        arrays = {
            k: _convert(k, features[k], self._inputs[k], self._where)
            for k in self._input_names
            if k in features
        }
        # A rank-0 input (a threshold, say) is one value for the whole call, not per example.
        sizes = {k: a.shape[0] for k, a in arrays.items() if a.ndim}
        if len(set(sizes.values())) > 1:
            raise PredictorInputError(
                f"Inputs have different batch sizes: {sizes} (scalar inputs are not counted)"
            )
        return arrays

    def _unfeedable_message(self) -> str:
        inputs = ", ".join(_describe(k, self._inputs[k]) for k in self._unfeedable)
        usable = sorted(
            name
            for name, sig in self._signature_defs.items()
            if all(_is_dense(info) for info in sig.inputs.values())
        )
        others = f" Signatures of this export with dense inputs only: {usable}" if usable else ""
        return (
            f"Signature {self._where} has the sparse (or ragged) input(s) [{inputs}], which "
            "Predictor cannot feed: only dense inputs can be. Export the model with "
            "serving.parsing_receiver (a multi-valued feature is then given as a list of "
            "values per example) or with a dense input that the serving_input_receiver_fn "
            f"turns into a SparseTensor (tf.sparse.from_dense, say).{others}"
        )

    def __call__(self, features: Mapping, *, batch_size: Optional[int] = None) -> dict:
        """Runs the signature on ``features``; returns output name -> NumPy array.

        Args:
          features: see :meth:`prepare`.
          batch_size: largest batch per session run (default: the constructor's).

        Returns:
          Output name -> NumPy array, one row per example.

        Raises:
          PredictorInputError, TypeError: see :meth:`prepare`.
        """
        arrays = self.prepare(features)
        if len(arrays) == len(self._input_names):  # every input given: no set built per call
            run, names = self._run, self._input_names
        else:
            run, names = self._runner_for(frozenset(arrays))
        values = [arrays[k] for k in names]
        limit = self._batch_size if batch_size is None else check_int("batch_size", batch_size)
        # The batch comes from the batched inputs (prepare checked they agree); a rank-0 input
        # is passed whole to every chunk.
        count = next((v.shape[0] for v in values if v.ndim), 0)
        if count <= limit:
            return dict(zip(self._output_names, run(*values)))
        chunks = [
            run(*[v[start : start + limit] if v.ndim else v for v in values])
            for start in range(0, count, limit)
        ]
        sizes = [min(limit, count - start) for start in range(0, count, limit)]
        return {
            name: self._merge(name, [c[i] for c in chunks], sizes)
            for i, name in enumerate(self._output_names)
        }

    def _merge(self, name: str, parts: list, sizes: list[int]) -> np.ndarray:
        """Joins one output's chunks: the rows of a per-example output, else the first chunk."""
        shape = self._outputs[name].shape
        if shape.rank is not None:
            per_example = shape.rank > 0 and shape.as_list()[0] is None
            return np.concatenate(parts) if per_example else parts[0]
        # Unknown static rank (tf.squeeze, some reshapes): decide from what the runs returned.
        # tf.squeeze also drops the batch axis of a one-example chunk; it is put back.
        rows = []
        for part, size in zip(parts, sizes):
            if np.ndim(part) > 0 and np.shape(part)[0] == size:
                rows.append(part)
            elif size == 1:
                rows.append(np.expand_dims(part, 0))
            else:
                return parts[0]
        return np.concatenate(rows)

    def _describe_inputs(self) -> str:
        return "[" + ", ".join(_describe(k, s) for k, s in self._inputs.items()) + "]"

    def close(self) -> None:
        """Releases the session; the predictor cannot be called afterwards."""
        self._session.close()

    def __enter__(self) -> Predictor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Predictor({self.export_dir!r}, signature={self.signature!r})"


def _session_callable(session, feeds: list, fetches: list) -> Callable:
    """``run(*feed_arrays) -> [fetched arrays]`` for one fixed feed/fetch signature.

    Public ``Session.make_callable(fetches, feed_list=feeds)`` goes through ``Session.run``'s
    Python feed and fetch handling on every call; a callable made from ``CallableOptions``
    (private, listed in ``_tf.PRIVATE_NAMES``; what Keras' TF1 backend uses) is one C++ call.
    Measured with ``python -m benchmarks --cases serving`` (2 cores, medians of 3): batch-1
    latency 2.38 ms with ``make_callable`` vs 1.98 ms with this (1.88 vs 1.05 ms with one intra-op
    thread); batch 1 against the raw TF2 signature 1.15x vs 1.96x (goal 1.5x). Both callables
    on one loaded BERT-tiny session, calls interleaved, on a busy 2-core machine: batch 1
    4.59 vs 3.54 ms, batch 64 49.9 vs 48.1 ms. The arrays must already have the feeds' dtypes,
    which :meth:`Predictor.prepare` guarantees.
    """
    options = CallableOptions()
    options.feed.extend(t.name for t in feeds)
    options.fetch.extend(t.name for t in fetches)
    return session._make_callable_from_options(options)


def _default_session_config():
    # A negative inter-op count runs this session's ops in the caller's thread (per session, no
    # process-wide pool is resized): measured 6-10% lower batch-1 latency on BERT-tiny with
    # equal batch-64 throughput (benchmarks/cases/serving.py).
    return tf.ConfigProto(inter_op_parallelism_threads=-1)
