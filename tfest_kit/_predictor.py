"""``Predictor``: load an exported SavedModel once, then answer many calls fast.

The export gets its own ``tf.compat.v1`` Graph and Session; each call runs one prepared session
callable: no per-call graph rebuild and restore (``estimator.predict``) nor eager dispatch.
"""

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np
from google.protobuf import message, text_format

from tfest_kit._checks import TfestKitError, check_int
from tfest_kit._model_dir import GLOB_CHARS, complete_exports, latest_export
from tfest_kit._tf import CallableOptions, SavedModel, tf, tf2

SignatureDef = type(tf.saved_model.build_signature_def())  # the proto class, from its builder


class PredictorInputError(TfestKitError, ValueError):
    """Features given to a :class:`Predictor` do not match its signature."""


class ExportLoadError(TfestKitError, OSError):
    """An export exists but cannot be loaded: a corrupt or truncated SavedModel."""


def _first_cause(error: Exception) -> str:
    """The line of a TensorFlow error that says what went wrong (not "Graph execution error")."""
    lines = [line.strip() for line in (getattr(error, "message", None) or str(error)).splitlines()]
    skip = ("Graph execution error", "Detected at", "Node:", "[[")
    return next((x for x in lines if x and not x.startswith(skip)), type(error).__name__)


def _resolve_export_dir(path: str) -> str:
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"`export_dir_or_base` must be a path. Got: {path!r}")
    path = os.fsdecode(path)  # export_saved_model returns bytes
    if any(tf.gfile.Exists(os.path.join(path, f)) for f in ("saved_model.pb", "saved_model.pbtxt")):
        return path
    return latest_export(path)


def _spec(info) -> tf2.TensorSpec:
    """The TensorSpec of a signature input or output; its ``name`` says what to feed."""
    if info.WhichOneof("encoding") != "name":  # a SparseTensor's or RaggedTensor's components
        dtype = tf.as_dtype(info.dtype) if info.dtype else tf.string
        return tf2.TensorSpec(None, dtype, name=info.WhichOneof("encoding"))
    return tf2.TensorSpec(info.tensor_shape, tf.as_dtype(info.dtype), name=info.name)


def read_signatures(
    export_dir_or_base: str, tags: Sequence[str] = ("serve",)
) -> tuple[str, dict[str, dict]]:
    """Reads every signature of an export; only ``saved_model.pb`` is read, not the variables.

    Args:
      export_dir_or_base: an export or a directory of exports (the newest complete one is used).
      tags: the MetaGraph tags to read.

    Returns:
      ``(export_dir, {name: {"method": str, "inputs": {name: TensorSpec}, "outputs": {...}}})``.

    Raises:
      ExportNotFoundError: if there is no complete export.
      ExportLoadError: if ``saved_model.pb`` cannot be read or parsed.
      ValueError: if the export has no MetaGraph with exactly ``tags``.

    Example:

        export_dir, signatures = read_signatures("model_dir/export/best")
    """
    export_dir = _resolve_export_dir(export_dir_or_base)
    return export_dir, {
        name: {
            "method": sig.method_name,
            "inputs": {k: _spec(v) for k, v in sorted(sig.inputs.items())},
            "outputs": {k: _spec(v) for k, v in sorted(sig.outputs.items())},
        }
        for name, sig in sorted(_meta_graph(export_dir, tags).signature_def.items())
    }


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
            f"corrupt or incomplete; export the model again. Got: {_first_cause(e)}"
        ) from e
    for meta_graph in saved_model.meta_graphs:
        if set(meta_graph.meta_info_def.tags) == set(tags):
            return meta_graph
    found = [sorted(m.meta_info_def.tags) for m in saved_model.meta_graphs]
    raise ValueError(f"`tags` {sorted(tags)} name no MetaGraph of {export_dir}; it has: {found}")


def _describe(name: str, spec: tf2.TensorSpec) -> str:
    shape = "unknown" if spec.shape.rank is None else str(spec.shape.as_list())
    return f"{name}: {spec.dtype.name} {shape}"


def _to_bytes(value: Any) -> Any:
    return value.encode() if isinstance(value, str) else value


def _convert(name: str, value: Any, spec: tf2.TensorSpec, where: str) -> np.ndarray:
    """Converts one input to the signature's dtype, or raises naming it and what was expected."""
    expected = f"signature {where} expects {_describe(name, spec)}"
    try:
        if spec.dtype == tf.string:  # dtype=object: NumPy's bytes dtype drops trailing zeros
            array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=object)
            target, allowed = np.dtype(object), "USO"
        else:
            array = np.asarray(value)
            target = np.dtype(spec.dtype.as_numpy_dtype)
            allowed = {"f": "fiu", "c": "fiuc", "i": "iu", "u": "iu", "b": "b"}[target.kind]
    except ValueError as e:  # NumPy: "setting an array element with a sequence…"
        raise PredictorInputError(f"Input {name!r} is ragged; {expected}") from e
    # [] is float64 to NumPy, whatever it stands for: no values, nothing to convert unsafely.
    if array.dtype.kind not in allowed and array.size:
        raise PredictorInputError(
            f"Input {name!r} has dtype {array.dtype}; {expected}. Got: {value!r:.80}"
        )
    if target.kind == "O" and array.size:
        array = np.vectorize(_to_bytes, otypes=[object])(array)
    cast = array.astype(target, copy=False)
    if cast is not array and target.kind in "iuf" and array.size:  # 1e40: inf; 2**40: wraps
        lost = np.isinf(cast) & np.isfinite(array) if target.kind == "f" else cast != array
        if lost.any():
            got = f"Input {name!r} holds {array[lost].flat[0].item()!r}, out of {target}'s range"
            raise PredictorInputError(f"{got}; {expected}")
    # Not TensorShape.is_compatible_with: it costs ~10 us per input per call, this ~1 us.
    want = array.shape if spec.shape.rank is None else spec.shape.as_list()
    if len(want) != array.ndim or any(w not in (None, g) for w, g in zip(want, array.shape)):
        raise PredictorInputError(f"Input {name!r} has shape {list(array.shape)}; {expected}")
    return cast


class _ExampleBuilder:
    """Serializes plain feature dicts into ``tf.train.Example``s for a parsing signature."""

    def __init__(self, session, parse_op):
        # Inputs: serialized, names, sparse_keys, dense_keys, ragged_keys, dense_defaults.
        keys = [k.decode() for keys in session.run(list(parse_op.inputs[2:5])) for k in keys]
        attrs = ("sparse_types", "Tdense", "ragged_value_types")
        types = [t for attr in attrs for t in parse_op.get_attr(attr)]
        self.keys = {k: tf.as_dtype(t) for k, t in zip(keys, types)}  # feature name -> dtype

    def build(self, features: Mapping, where: str) -> np.ndarray:
        if unknown := sorted(set(features) - set(self.keys)):
            raise PredictorInputError(
                f"Signature {where} parses tf.train.Examples with features "
                f"{sorted(self.keys)}. Got unknown: {unknown}"
            )
        # Not np.ndim: NumPy refuses the uneven per-example lists of a VarLenFeature.
        lengths = {
            k: len(v) if isinstance(v, (list, tuple)) or np.ndim(v) > 0 else None
            for k, v in features.items()
        }
        if None in lengths.values() or len(set(lengths.values())) > 1:
            raise PredictorInputError(
                f"Every feature must hold one entry per example. Got lengths: {lengths}"
            )
        serialized = np.empty([next(iter(lengths.values()), 0)], dtype=object)
        for i in range(len(serialized)):
            example = tf.train.Example()
            for key, values in features.items():
                self._fill(example, key, values[i])
            serialized[i] = example.SerializeToString()
        return serialized

    def _fill(self, example, key: str, value: Any) -> None:
        dtype = self.keys[key]
        try:
            flat = np.asarray(value, dtype=object if dtype == tf.string else None).ravel()
            if not flat.size:
                return  # left out: the parser's default (present but empty is an error)
            feature = example.features.feature[key]
            if dtype == tf.string:
                # A list, not a generator: protobuf may drop a generator's non-bytes silently.
                feature.bytes_list.value.extend([_to_bytes(v) for v in flat])
            elif dtype.is_floating:
                feature.float_list.value.extend(flat.astype(np.float32).tolist())
            elif flat.dtype.kind in "iub":
                feature.int64_list.value.extend(flat.astype(np.int64).tolist())
            else:
                raise TypeError(flat.dtype)
        except (TypeError, ValueError) as e:
            raise PredictorInputError(
                f"Feature {key!r} is parsed as {dtype.name}; cannot store {value!r:.80} in a "
                f"tf.train.Example ({e})"
            ) from e


class Predictor:
    """Serves an exported SavedModel from Python: load once, call many times.

    Replaces the removed ``tf.contrib.predictor``. Inputs are converted to the signature's dtypes
    when safe; an error names the input and what it expected. A ``tf.train.Example``-parsing
    signature also takes plain feature dicts (a list per example for multi-valued features).
    Inputs the outputs do not depend on may be left out.

    Args:
      export_dir_or_base: an export, or a directory of exports (the newest complete one is
        used); ``str``, ``bytes`` (what ``export_saved_model`` returns) or ``os.PathLike``.
      signature: the signature's name, or a ``SignatureDef`` naming tensors of the graph.
      batch_size: default largest batch per session run; a rank-0 input goes whole to each.
      tags: the MetaGraph tags to load.
      session_config: a ``tf.compat.v1.ConfigProto``; default ``inter_op_parallelism_threads=-1``
        (ops run in the calling thread, this session only).
      graph: the ``tf.compat.v1.Graph`` to load into; default a new one.

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
            # Ops in the caller's thread (this session only): lower batch-1 latency (benchmarks).
            session_config = tf.ConfigProto(inter_op_parallelism_threads=-1)
        self._session = tf.Session(graph=self._graph, config=session_config)
        try:
            self._load(list(tags), signature)
        except Exception:
            self._session.close()
            raise

    def _load(self, tags: list[str], signature: Union[str, SignatureDef]) -> None:
        _meta_graph(self.export_dir, tags)  # the loader's error for missing tags lists none
        try:
            with self._graph.as_default():
                meta_graph = tf.saved_model.loader.load(self._session, tags, self.export_dir)
        except (OSError, ValueError, tf.errors.OpError) as e:  # ValueError: Saver.restore's
            here = os.path.normpath(self.export_dir)
            fix, exports = "export the model again", complete_exports(os.path.dirname(here))
            if len(exports) > 1 and exports[-1] == here:  # a base's newest: the one before may do
                fix += f", or pass the one before, {exports[-2]}"
            if GLOB_CHARS.search(self.export_dir):  # its variables are looked up as a pattern
                fix = "move it to a path without the characters * ? [ (TensorFlow globs it)"
            raise ExportLoadError(
                f"The SavedModel at {self.export_dir} could not be loaded; {fix}. "
                f"Got: {type(e).__name__}: {_first_cause(e)}"
            ) from e
        self._signature_defs = dict(meta_graph.signature_def)
        if isinstance(signature, SignatureDef):
            sig = self._completed(signature)
            signature = "<the SignatureDef given>"
        elif signature in self._signature_defs:
            sig = self._signature_defs[signature]
        else:
            raise ValueError(
                f"`signature` {signature!r} is not in {self.export_dir}. "
                f"Available signatures: {sorted(self._signature_defs)}"
            )
        self.signature, self._sig = signature, sig
        self._inputs = {k: _spec(v) for k, v in sorted(sig.inputs.items())}
        self._outputs = {k: _spec(v) for k, v in sorted(sig.outputs.items())}
        self._input_names, self._output_names = list(self._inputs), list(self._outputs)
        self._where = f"{signature!r} of {self.export_dir}"
        self._examples = self._run = self._needed = None
        # A SparseTensor input has several component tensors: refused when called, not here.
        self._unfeedable = [
            k for k in self._input_names if sig.inputs[k].WhichOneof("encoding") != "name"
        ]
        if self._unfeedable:
            return
        self._subset_runs: dict[frozenset, tuple[Callable, list[str]]] = {}
        self._run = self._make_run(self._input_names)
        first = self._input_names[0]
        if len(self._input_names) == 1 and self._inputs[first].dtype == tf.string:
            feed = self._graph.get_tensor_by_name(sig.inputs[first].name)
            parses = [op for op in feed.consumers() if op.type == "ParseExampleV2"]
            self._examples = _ExampleBuilder(self._session, parses[0]) if parses else None

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
                        f"{self.export_dir} does not have. Got: {e}"
                    ) from e
                with self._graph.as_default():  # build_tensor_info refuses eager mode
                    info.CopyFrom(tf.saved_model.utils.build_tensor_info(tensor))
        return full

    def _make_run(self, input_names: list[str]) -> Callable:
        """``run(*arrays of input_names) -> [every output]``: one ``CallableOptions`` callable
        (``_tf.PRIVATE_NAMES``), one C++ call, faster than ``Session.make_callable`` at batch 1."""
        feed_names = [self._sig.inputs[k].name for k in input_names]
        output_names = [self._sig.outputs[k].name for k in self._output_names]
        # An output may be an input passed through (instance keys). A session callable refuses
        # to feed and fetch one tensor, so such outputs are answered from the fed arrays.
        sources = [feed_names.index(n) if n in feed_names else None for n in output_names]
        fetched = [n for n, i in zip(output_names, sources) if i is None]
        options = CallableOptions(feed=feed_names, fetch=fetched)
        fetch = self._session._make_callable_from_options(options)
        if all(i is None for i in sources):
            return fetch

        def run_passing_inputs(*values: np.ndarray) -> list:
            fetched = iter(fetch(*values))
            return [next(fetched) if i is None else values[i] for i in sources]

        return run_passing_inputs

    def _needed_inputs(self) -> frozenset:
        """The inputs the outputs depend on, except ``placeholder_with_default`` ones."""
        if self._needed is None:
            get = self._graph.get_tensor_by_name
            pending, seen = [get(self._sig.outputs[k].name).op for k in self._output_names], set()
            while pending:
                op = pending.pop()
                if op not in seen:
                    seen.add(op)
                    pending.extend([t.op for t in op.inputs] + list(op.control_inputs))
            feeds = {k: get(self._sig.inputs[k].name).op for k in self._input_names}
            self._needed = frozenset(
                k for k, op in feeds.items() if op in seen and op.type != "PlaceholderWithDefault"
            )
        return self._needed

    @property
    def inputs(self) -> dict[str, tf2.TensorSpec]:
        """Input name -> ``tf.TensorSpec``."""
        return dict(self._inputs)

    @property
    def outputs(self) -> dict[str, tf2.TensorSpec]:
        """Output name -> ``tf.TensorSpec``."""
        return dict(self._outputs)

    def prepare(self, features: Mapping) -> dict[str, np.ndarray]:
        """Checks and converts ``features`` into the arrays fed to the signature's inputs.

        Args:
          features: input name -> array-like with a leading batch dimension; for a parsing
            signature, alternatively feature name -> per-example values.

        Returns:
          Input name -> NumPy array of the signature's dtype, for the inputs given.

        Raises:
          PredictorInputError: (a ``ValueError``) if a name, shape or dtype does not fit.
          TypeError: if ``features`` is not a dict.
        """
        if not isinstance(features, Mapping):
            raise TypeError(
                f"`features` must be a dict of input name -> values; signature {self._where} "
                f"has inputs {self._describe_inputs()}. Got: {features!r:.80}"
            )
        if self._unfeedable:
            raise PredictorInputError(
                f"Signature {self._where} has sparse or ragged inputs {self._unfeedable}, which "
                "Predictor cannot feed: export with serving.parsing_receiver or dense inputs."
            )
        if self._examples is not None and set(features) != set(self._input_names):
            features = {self._input_names[0]: self._examples.build(features, self._where)}
        if len(features) != len(self._input_names) or any(k not in self._inputs for k in features):
            missing = sorted(set(self._input_names) - set(features))
            unknown = sorted(set(features) - set(self._input_names))
            needed = sorted(set(missing) & self._needed_inputs())
            if unknown or needed:
                raise PredictorInputError(
                    f"Signature {self._where} has inputs {self._describe_inputs()}. "
                    f"Got missing: {missing}, unknown: {unknown}"
                    + (f" (the outputs depend on {needed})" if needed and not unknown else "")
                )
        arrays = {k: _convert(k, v, self._inputs[k], self._where) for k, v in features.items()}
        # A rank-0 input (a threshold, say) is one value for the whole call, not per example.
        sizes = {k: a.shape[0] for k, a in arrays.items() if a.ndim}
        if len(set(sizes.values())) > 1:
            raise PredictorInputError(
                f"Inputs have different batch sizes: {sizes} (scalar inputs are not counted)"
            )
        return arrays

    def __call__(self, features: Mapping, *, batch_size: Optional[int] = None) -> dict:
        """Runs the signature on ``features`` (see :meth:`prepare`); returns output -> array.
        ``batch_size`` (default: the constructor's) is the largest batch per session run."""
        if self._session._closed:  # "CancelledError: Session has been closed."
            raise RuntimeError(f"{self!r} was closed (close(), or its with-block ended)")
        arrays = self.prepare(features)
        if len(arrays) == len(self._input_names):  # every input given: no set built per call
            run, names = self._run, self._input_names
        else:
            given = frozenset(arrays)
            if given not in self._subset_runs:
                names = [k for k in self._input_names if k in given]
                self._subset_runs[given] = (self._make_run(names), names)
            run, names = self._subset_runs[given]
        values = [arrays[k] for k in names]
        limit = self._batch_size if batch_size is None else check_int("batch_size", batch_size)
        count = next((v.shape[0] for v in values if v.ndim), 0)  # rank-0 inputs go whole
        if count <= limit:
            return dict(zip(self._output_names, run(*values)))
        starts = list(range(0, count, limit))
        if limit > 1 and count % limit == 1:  # a one-row run can lose its batch axis (tf.squeeze)
            starts[-1] -= 1
        bounds = zip(starts, starts[1:] + [count])
        chunks = [run(*[v[a:b] if v.ndim else v for v in values]) for a, b in bounds]
        return {k: self._merge(k, [c[i] for c in chunks]) for i, k in enumerate(self._output_names)}

    def _merge(self, name: str, parts: list) -> np.ndarray:
        """Joins one output's chunks: the rows of a per-example output, else the first chunk."""
        per_example = (shape := self._outputs[name].shape).rank and shape.as_list()[0] is None
        if shape.rank is None:  # tf.squeeze, say: per example if every run answered rows
            per_example = all(np.ndim(part) for part in parts)
        return np.concatenate(parts) if per_example else parts[0]

    def _describe_inputs(self) -> str:
        return "[" + ", ".join(_describe(k, s) for k, s in self._inputs.items()) + "]"

    def close(self) -> None:
        """Releases the session; the predictor cannot be called afterwards."""
        self._session.close()

    def __enter__(self) -> "Predictor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Predictor({self.export_dir!r}, signature={self.signature!r})"
