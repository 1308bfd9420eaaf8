"""``input_fn`` builders over tf.data: NumPy / pandas, CSV, TFRecord of ``tf.train.Example``.

Each builder checks its arguments and files at once (where the official readers fail late, or
name no file: the ``test_official_*`` tests show each gap) and returns ``input_fn(params=None)``;
``params["batch_size"]``, when the Estimator passes it, wins. Bad data raises :class:`DataError`.
"""

from __future__ import annotations

import collections
import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from tfest_kit._checks import check_int
from tfest_kit._csv_scan import INT64_MAX, INT64_MIN, check_csv, record_default
from tfest_kit._errors import DataError
from tfest_kit._tf import tf, tf2

__all__ = ["DataError", "from_arrays", "from_csv", "from_tfrecord", "write_tfrecord"]

AUTOTUNE = tf2.data.AUTOTUNE
InputFn = Callable[..., Any]
FilePattern = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]
_DEFAULT_SHUFFLE_BUFFER = 10_000
_FILES_AT_ONCE = 8  # files read at once while shuffling: the buffer then mixes several shards


def _check_common(batch_size: int, num_epochs: Optional[int], shuffle_buffer: Optional[int]):
    check_int("batch_size", batch_size)
    check_int("num_epochs", num_epochs, allow_none=True, hint="None repeats forever")
    check_int("shuffle_buffer", shuffle_buffer, allow_none=True)


def _check_compression(compression: Optional[str]) -> Optional[str]:
    if compression not in (None, "", "GZIP", "ZLIB"):
        raise ValueError(f"`compression` must be None, 'GZIP' or 'ZLIB'. Got: {compression!r}")
    return compression or None


def _input_fn(make, parse, batch_size, shuffle, buffer, num_epochs, seed, drop_remainder):
    """``input_fn(params=None)``: ``make()``'s records shuffled before repeat (each epoch sees
    every example once), batched, parsed and prefetched."""

    def input_fn(params=None):
        size = batch_size
        if params and params.get("batch_size") is not None:
            # Estimator(params=...) hands params over unchecked; batch(0) or batch(8.9) fail late.
            size = check_int("params['batch_size']", params["batch_size"], hint="from params")
        ds = make()
        if shuffle:
            ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
        ds = ds.repeat(num_epochs).batch(size, drop_remainder=drop_remainder)
        if parse is not None:
            ds = ds.map(parse, num_parallel_calls=AUTOTUNE)
        return ds.prefetch(AUTOTUNE)

    return input_fn


def _read_files(files, read, shuffle: bool, seed, files_at_once: Optional[int] = None):
    """The records of ``files``, each read by ``read(path)``.

    Shuffling: in an order the seed fixes, up to 8 files interleaved (files of one class each
    gave batches of one class). Else one file after another in the order given, so predictions
    follow the rows (the official pipelines sort them).
    """
    paths = tf2.data.Dataset.from_tensor_slices(files)
    if shuffle:
        paths = paths.shuffle(len(files), seed=seed)
    if files_at_once is None:
        files_at_once = _FILES_AT_ONCE if shuffle else 1
    cycle = max(1, min(files_at_once, len(files)))
    if cycle == 1:
        return paths.interleave(read, cycle_length=1)
    # Deterministic (tf.data's default): the order is the shuffles', which a seed fixes.
    return paths.interleave(read, cycle_length=cycle, num_parallel_calls=AUTOTUNE)


def _describe_dir(directory: str) -> str:
    directory = directory or "."
    if not tf2.io.gfile.isdir(directory):
        return f"directory {directory!r} does not exist"
    entries = sorted(tf2.io.gfile.listdir(directory))
    more = f" … and {len(entries) - 20} more" if len(entries) > 20 else ""
    return f"directory {directory!r} contains: {', '.join(entries[:20]) or 'nothing'}{more}"


def _glob_files(file_pattern: FilePattern) -> list[str]:
    """The files one pattern or a list of them match; DataError for none or a directory."""
    if isinstance(file_pattern, (str, os.PathLike)):
        file_pattern = [file_pattern]
    if not isinstance(file_pattern, Sequence) or not file_pattern:
        raise TypeError(
            "`file_pattern` must be a path / glob pattern or a non-empty list of them. "
            f"Got: {file_pattern!r}"
        )
    files: dict[str, None] = {}  # ordered and fast for 20,000 shards
    for pattern in map(os.fspath, file_pattern):
        matched = sorted(tf2.io.gfile.glob(pattern))
        if not matched:
            where = _describe_dir(os.path.dirname(pattern))
            raise DataError(f"`file_pattern` {pattern!r} matches no file; {where}.")
        for directory in filter(tf2.io.gfile.isdir, matched):
            # The readers call a directory "the file is empty" or fail with "Is a directory".
            if os.path.normpath(pattern) == os.path.normpath(directory):
                what, where = "is a directory", os.path.join(directory, "*")
            else:
                what, where = f"matches the directory {directory!r}", pattern
            inside = [m for m in matched if not tf2.io.gfile.isdir(m)] or tf2.io.gfile.glob(where)
            extensions = collections.Counter(os.path.splitext(f)[1] for f in inside)
            extension = max(extensions, key=lambda e: (bool(e), extensions[e]), default="")
            example = os.path.join(os.path.dirname(where), "*" + extension)
            raise DataError(
                f"`file_pattern` {pattern!r} {what}, not files: pass a pattern that matches "
                f"files only, such as {example!r}; {_describe_dir(directory)}."
            )
        files.update(dict.fromkeys(matched))
    return list(files)


def _is_pandas(value: Any) -> bool:
    return hasattr(value, "index") and hasattr(value, "iloc")


def _tf_friendly(array: np.ndarray, name: str) -> np.ndarray:
    if array.dtype == np.float64:
        # Keras layers and feature columns compute in float32; float64 input only costs casts.
        return array.astype(np.float32)
    if array.dtype == object:
        odd = [v for v in array.ravel() if not isinstance(v, (str, bytes))]
        if odd:
            raise TypeError(
                f"Feature {name!r} holds Python objects that are not all strings (missing "
                f"values?); convert it to a numeric or string array. Got: {odd[0]!r} "
                f"({type(odd[0]).__name__})"
            )
        return array.astype(str)
    return array


def _arrays(features: Any, labels: Any, feature_name: str):
    """(features dict, label array or None, number of rows), checked."""
    # Rows are paired by position: unequal indexes would pair rows with other rows' labels.
    if _is_pandas(features) and _is_pandas(labels) and not features.index.equals(labels.index):
        raise ValueError(
            "`features` and `labels` are pandas objects with different indexes; rows are "
            f"paired by position. Got: features.index starts {list(features.index[:5])}, "
            f"labels.index starts {list(labels.index[:5])}. Pass labels.loc[features.index], "
            "or reset_index(drop=True) on both if positions match."
        )
    if hasattr(features, "columns") and _is_pandas(features):  # a DataFrame
        feats = {str(col): features[col].to_numpy() for col in features.columns}
    elif isinstance(features, Mapping) and features:
        feats = {str(k): np.asarray(v) for k, v in features.items()}
    elif isinstance(features, Mapping):
        raise ValueError("`features` must not be an empty dict.")
    elif isinstance(features, (np.ndarray, list, tuple)):
        feats = {feature_name: np.asarray(features)}
    else:
        raise TypeError(
            "`features` must be a dict of arrays, a NumPy array or a pandas DataFrame. "
            f"Got: {type(features).__name__}"
        )
    if isinstance(labels, str):
        if labels not in feats:
            raise DataError(
                f"Label column {labels!r} is not in `features`; columns are: {sorted(feats)}."
            )
        labels = feats.pop(labels)
        if not feats:
            raise ValueError("`features` has no column left once the label column is removed.")
    feats = {k: _tf_friendly(v, k) for k, v in feats.items()}
    label_array = None if labels is None else _tf_friendly(np.asarray(labels), "labels")
    named = {**feats, "<labels>": label_array} if label_array is not None else feats
    lengths = {k: (len(v) if v.ndim else -1) for k, v in named.items()}
    if len(set(lengths.values())) != 1 or -1 in lengths.values() or 0 in lengths.values():
        raise ValueError(
            "All feature arrays and the labels must have the same number (>= 1) of rows. "
            f"Got rows per key: {lengths}"
        )
    return feats, label_array, next(iter(lengths.values()))


# Arrays up to this many bytes in all become constants of the input_fn's graph; Estimator
# writes that graph into graph.pbtxt, the events file and every checkpoint's .meta (40 MB of
# data made 300 MB of files), and a graph cannot exceed 2 GB. Larger arrays stay in this
# process and are looked up a batch at a time, as numpy_input_fn's feeding did.
_EMBEDDED_ARRAYS_LIMIT = 16 << 20


def from_arrays(
    features: Any,
    labels: Any = None,
    *,
    batch_size: int = 32,
    shuffle: bool = True,
    num_epochs: Optional[int] = 1,
    shuffle_buffer: Optional[int] = None,
    drop_remainder: bool = False,
    seed: Optional[int] = None,
    feature_name: str = "x",
) -> InputFn:
    """Builds an ``input_fn`` over in-memory NumPy arrays or a pandas DataFrame.

    Unlike ``numpy_input_fn`` / ``pandas_input_fn`` (queue runners), it gives a ``Dataset``
    (which ``TPUEstimator`` needs) and ``drop_remainder``. ``float64`` is fed as ``float32``;
    arrays over 16 MB stay in this process (read a batch at a time), so the ``input_fn`` runs
    only where it was built.

    Args:
      features: a dict ``{name: array}``, a DataFrame or one array (the feature ``feature_name``).
      labels: one label per row (array or Series with the DataFrame's index), the name of a
        column of ``features``, or None (prediction).
      batch_size: examples per batch unless ``params["batch_size"]`` is given.
      shuffle: shuffle the rows (False for evaluation and prediction); files are then read
        in an order the seed fixes, else one after another in the order given.
      num_epochs: passes over the data; None repeats forever.
      shuffle_buffer: shuffle buffer size; default: all rows, at most 10,000.
      drop_remainder: drop the last, smaller batch (static batch shapes, TPU style).
      seed: shuffle seed.
      feature_name: the key a bare array ``features`` gets.

    Returns:
      ``input_fn(params=None)``: a ``Dataset`` of ``(features, labels)`` or ``features`` batches.

    Raises:
      DataError: ``labels`` names a column that is not in ``features``.
      ValueError: rows or pandas indexes that differ, a bad argument or ``params["batch_size"]``.
      TypeError: ``features`` of an unsupported type.

    Example:

        train_fn = from_arrays(df, "target", batch_size=64, num_epochs=None)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    feats, label_array, num_rows = _arrays(features, labels, feature_name)
    buffer = shuffle_buffer or min(num_rows, _DEFAULT_SHUFFLE_BUFFER)
    data = feats if label_array is None else (feats, label_array)
    if sum(array.nbytes for array in tf2.nest.flatten(data)) <= _EMBEDDED_ARRAYS_LIMIT:
        make, parse = functools.partial(tf2.data.Dataset.from_tensor_slices, data), None
    else:  # row numbers, looked up batch by batch
        make = functools.partial(tf2.data.Dataset.range, num_rows)
        parse = functools.partial(_rows_of, data)
    return _input_fn(make, parse, batch_size, shuffle, buffer, num_epochs, seed, drop_remainder)


def _rows_of(data: Any, rows: Any) -> Any:
    """``data``'s rows numbered by the int64 tensor ``rows``, read from NumPy in Python."""
    arrays = tf2.nest.flatten(data)
    # numpy_function turns str arrays into bytes as ASCII: encode them as UTF-8 first.
    text = [array.dtype.kind == "U" for array in arrays]

    def look_up(index):
        return [np.char.encode(a[index], "utf-8") if t else a[index] for a, t in zip(arrays, text)]

    dtypes = [tf2.string if t else tf2.as_dtype(a.dtype) for a, t in zip(arrays, text)]
    looked_up = tf2.numpy_function(look_up, [rows], dtypes, stateful=False)
    for tensor, array in zip(looked_up, arrays):
        tensor.set_shape(rows.shape.concatenate(array.shape[1:]))
    return tf2.nest.pack_sequence_as(data, looked_up)


def from_csv(
    file_pattern: FilePattern,
    column_names: Optional[Sequence[str]] = None,
    label_name: Optional[str] = None,
    *,
    column_defaults: Any = None,
    select_columns: Optional[Sequence[str]] = None,
    header: bool = True,
    field_delim: str = ",",
    na_value: str = "",
    compression: Optional[str] = None,
    batch_size: int = 32,
    shuffle: bool = True,
    num_epochs: Optional[int] = 1,
    shuffle_buffer: Optional[int] = None,
    drop_remainder: bool = False,
    seed: Optional[int] = None,
    validate: bool = True,
) -> InputFn:
    """Builds an ``input_fn`` over CSV files with ``tf.data.experimental.CsvDataset``.

    The files are checked once, in Python, when the builder is called: row widths (naming
    ``file:line``), columns, and types, inferred (int32, int64, float32, string) unless
    ``column_defaults`` gives them. A numeric column with a few other fields or a missing-value
    marker (``"NA"``, ``"?"``) is refused, naming ``na_value``, not read as text.

    Args:
      file_pattern: a path, glob pattern or list of them (``"data/train-*.csv"``).
      column_names: the column names; default: the header line of the first file.
      label_name: the column to return as the label, or None for features only.
      column_defaults: a list, or a dict for some columns: a value (``0``, ``""``) fills empty
        fields, a dtype (``tf.float32``) makes the column required. Default: inferred.
      select_columns: read only these columns (the label is always read).
      header: whether each file starts with a header line (skipped).
      field_delim: the field separator.
      na_value: a string that stands for a missing value.
      compression: None, ``"GZIP"`` or ``"ZLIB"``.
      batch_size, shuffle, num_epochs, shuffle_buffer, drop_remainder, seed: as in
        :func:`from_arrays` (the default buffer: 10,000 rows; 8 files read at once).
      validate: check every row up front; False reads 100 rows per file (to infer types).

    Returns:
      ``input_fn(params=None)``: a ``Dataset`` of ``(features, label)`` or ``features`` batches.

    Raises:
      DataError: no file matches; a bad row or header; a missing column; a numeric column with
        non-numeric fields.
      ValueError: a bad argument or ``params["batch_size"]``.
      TypeError: a ``column_defaults`` entry that is not an int, float, str or tf dtype.

    Example:

        train_fn = from_csv("/tmp/iris/train.csv", label_name="species", num_epochs=None)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    compression = _check_compression(compression)
    if not isinstance(field_delim, str) or len(field_delim) != 1:
        raise ValueError(f"`field_delim` must be a single character. Got: {field_delim!r}")
    files = _glob_files(file_pattern)
    scan = (header, field_delim, compression, None if validate else 100, na_value)
    indices, picked, defaults = check_csv(
        files, column_names, label_name, select_columns, column_defaults, scan
    )
    buffer = shuffle_buffer or _DEFAULT_SHUFFLE_BUFFER

    def to_dict(*columns):
        feats = dict(zip(picked, columns))
        return feats if label_name is None else (feats, feats.pop(label_name))

    def read(path):
        return tf2.data.experimental.CsvDataset(
            path,
            [record_default(d) for d in defaults],
            compression_type=compression or "",
            header=header,
            field_delim=field_delim,
            na_value=na_value,
            select_cols=indices,
        )

    make = functools.partial(_read_files, files, read, shuffle, seed)
    return _input_fn(make, to_dict, batch_size, shuffle, buffer, num_epochs, seed, drop_remainder)


_LIST_OF_DTYPE = {tf2.int64: "int64_list", tf2.float32: "float_list", tf2.string: "bytes_list"}


def _check_feature_spec(feature_spec: Any, label_key: Optional[str]) -> dict:
    if not isinstance(feature_spec, Mapping) or not feature_spec:
        raise (ValueError if isinstance(feature_spec, Mapping) else TypeError)(
            "`feature_spec` must be a non-empty dict {key: tf.io.FixedLenFeature(...) | ...}. "
            f"Got: {feature_spec!r}"
        )
    if label_key is not None and label_key not in feature_spec:
        raise ValueError(
            f"`label_key` {label_key!r} is not a key of `feature_spec`; keys are: "
            f"{sorted(feature_spec)}. Add e.g. "
            f"feature_spec[{label_key!r}] = tf.io.FixedLenFeature([], tf.int64)."
        )
    for key, config in feature_spec.items():
        dtype = getattr(config, "dtype", None)
        if dtype is not None and tf2.as_dtype(dtype) not in _LIST_OF_DTYPE:
            # parse_example refuses it only inside train(), naming `dense_defaults`.
            raise ValueError(
                f"`feature_spec` {key!r} asks for {tf2.as_dtype(dtype).name}, which a "
                "tf.train.Example cannot hold: ask for tf.int64, tf.float32 or tf.string (and "
                f"cast in the model_fn). Got: {config!r}"
            )
    return dict(feature_spec)


def _mismatch(key: str, config: Any, feature) -> Optional[str]:
    """What makes one stored feature unparseable with its spec entry, or None."""
    checked = (tf2.io.FixedLenFeature, tf2.io.VarLenFeature, tf2.io.FixedLenSequenceFeature)
    kind = feature.WhichOneof("kind")
    if not isinstance(config, checked) or kind is None:
        return None
    if kind != _LIST_OF_DTYPE[config.dtype]:
        wanted = {v: k.name for k, v in _LIST_OF_DTYPE.items()}[kind]
        return (
            f"{key!r} is stored as {kind} but the spec asks for {config.dtype.name}: store "
            f"{config.dtype.name} values or ask for tf.{wanted}"
        )
    count = len(getattr(feature, kind).value)
    # An empty list too: parse_example refuses it even when the spec has a default_value.
    if isinstance(config, tf2.io.FixedLenFeature):
        size = int(np.prod(config.shape, dtype=np.int64)) if config.shape else 1
        if count != size:
            return (
                f"{key!r} holds {count} values; the spec's shape {list(config.shape)} needs {size}"
            )
    return None


def _check_example(path: str, record: bytes, spec: Mapping[str, Any]) -> None:
    """DataError for an Example parse_example would refuse mid-training, naming no file."""
    present = tf2.train.Example.FromString(record).features.feature
    missing = sorted(
        key
        for key, feature in spec.items()
        if isinstance(feature, tf2.io.FixedLenFeature)
        and feature.default_value is None
        and key not in present
    )
    if missing:
        raise DataError(
            f"{path}: the first example has no feature {missing}, which `feature_spec` "
            f"requires; the examples have: {sorted(present)}."
        )
    problems = [_mismatch(key, spec[key], present[key]) for key in spec if key in present]
    if any(problems):
        raise DataError(
            f"{path}: the first example does not match `feature_spec`: "
            f"{'; '.join(p for p in problems if p)}."
        )


def _damage(path: str, error: Exception, compression: Optional[str]) -> DataError:
    """The DataError for a shard TensorFlow's reader stopped in, naming the file and the fix."""
    found = re.search(r"(truncated|corrupted) record at (\d+)", str(error))
    if not found:
        return DataError(
            f"{path}: cannot read a tf.train.Example (compression={compression!r}): {error}"
        )
    if found[1] == "truncated":
        problem = f"it is truncated: the record at byte {found[2]} is cut short"
    elif found[2] == "0" and not compression:
        problem = (
            "it does not start with a TFRecord header (if it was written with compression, "
            "pass compression='GZIP' or 'ZLIB')"
        )
    else:
        problem = f"it is corrupt: the bytes at {found[2]} are not a whole record (bad checksum)"
    return DataError(
        f"{path}: {problem}. An interrupted copy or write leaves a file like this; "
        "copy or write it again, or leave it out of `file_pattern`."
    )


def _check_tfrecords(files: list[str], spec: Mapping[str, Any], compression, whole: bool):
    """Reads every local shard once (``whole``) with TensorFlow's reader; checks the first example.

    TFRecordDataset meets a cut shard only when training reaches its end, and its message names
    no file. The C++ reader is fast (12,000 records, 3.6 MB: 15 ms); remote shards are not read.
    """
    options = tf.io.TFRecordOptions(compression or "")
    first = None
    for path in files:
        partly = "://" in path or not whole
        if first is not None and partly:
            continue
        try:
            for record in tf.io.tf_record_iterator(path, options=options):
                if first is None:
                    first = path
                    _check_example(path, record, spec)
                if partly:
                    break
        except DataError:
            raise
        except Exception as error:  # noqa: BLE001 - a damaged file, or the wrong compression
            raise _damage(path, error, compression) from error
    if first is None:
        raise DataError(f"No file matched by the pattern holds any example: {files}")


def from_tfrecord(
    file_pattern: FilePattern,
    feature_spec: Mapping[str, Any],
    label_key: Optional[str] = None,
    *,
    compression: Optional[str] = None,
    num_parallel_reads: Optional[int] = AUTOTUNE,
    batch_size: int = 32,
    shuffle: bool = True,
    num_epochs: Optional[int] = 1,
    shuffle_buffer: Optional[int] = None,
    drop_remainder: bool = False,
    seed: Optional[int] = None,
    validate: bool = True,
) -> InputFn:
    """Builds an ``input_fn`` over TFRecord files of serialized ``tf.train.Example``.

    ``TFRecordDataset`` reads, ``tf.io.parse_example`` parses each batch. When the builder is
    called, every local shard is read once (a cut one is named now, not mid-training) and the
    first example is checked against ``feature_spec``.

    Args:
      file_pattern: a path, glob pattern or list of them (``"data/train.tfrecord-*"``).
      feature_spec: ``{key: tf.io.FixedLenFeature | VarLenFeature | …}`` with the label's entry.
      label_key: the key of ``feature_spec`` to return as the label, or None for features only.
      compression: None, ``"GZIP"`` or ``"ZLIB"`` (as written by :func:`write_tfrecord`).
      num_parallel_reads: files read at once; default: up to 8 when shuffling, else one by one.
      batch_size, shuffle, num_epochs, shuffle_buffer, drop_remainder, seed: as in
        :func:`from_arrays` (the default buffer: 10,000 records).
      validate: read every local shard up front (about 250 MB/s); False: the first example only.

    Returns:
      ``input_fn(params=None)``: a ``Dataset`` of ``(features, label)`` or ``features`` batches.

    Raises:
      TypeError: ``feature_spec`` is not a dict.
      ValueError: a bad argument, ``label_key`` or spec dtype.
      DataError: no file matches; a file unreadable, cut or corrupt; a first example that does
        not match ``feature_spec``.

    Example:

        spec = {"x": tf.io.FixedLenFeature([4], tf.float32)}
        spec["y"] = tf.io.FixedLenFeature([], tf.int64)
        train_fn = from_tfrecord("/tmp/data/train.tfr-*", spec, "y", num_epochs=None)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    compression = _check_compression(compression)
    spec = _check_feature_spec(feature_spec, label_key)
    files = _glob_files(file_pattern)
    _check_tfrecords(files, spec, compression, whole=validate)
    buffer = shuffle_buffer or _DEFAULT_SHUFFLE_BUFFER
    # Not make_batched_features_dataset: it sorts unshuffled files (see _read_files).
    # TFRecordDataset's own AUTOTUNE read the files one after another (TF 2.15).
    parallel = None if num_parallel_reads in (None, AUTOTUNE) else num_parallel_reads

    def parse(serialized):
        feats = tf2.io.parse_example(serialized, spec)
        return feats if label_key is None else (feats, feats.pop(label_key))

    def read(path):
        return tf2.data.TFRecordDataset(path, compression_type=compression or "")

    make = functools.partial(_read_files, files, read, shuffle, seed, parallel)
    return _input_fn(make, parse, batch_size, shuffle, buffer, num_epochs, seed, drop_remainder)


_INT64_LIST, _FLOAT_LIST, _BYTES_LIST = 0, 1, 2  # the value lists of a tf.train.Feature, by kind
_KIND_NAMES = ["int64", "float", "bytes"]
# float32, which a float_list holds, has every integer only up to 2**24 (some above too).
_FLOAT32_EXACT_INTS = 2**24


def _outside_int64(where: str, value: int) -> ValueError:
    return ValueError(
        f"{where}: {value} is outside int64, the only integer type a tf.train.Example holds; "
        "write it as a string (bytes_list) or scale it."
    )


def _value_kind(value: Any, key: str, row: int) -> tuple[Optional[int], list]:
    """(kind, flat list of values) of one row's value; kind None for an empty list."""
    where = f"Row {row}, feature {key!r}"
    if value is None:
        raise TypeError(
            f"{where} is None (a missing value?): a tf.train.Example has no missing values. "
            "Leave the key out of that row (the reader's default_value fills it) or write one."
        )
    try:
        values = np.asarray(value)
        if values.dtype == object and values.ndim > 0:
            values = np.asarray(list(values.ravel()))
    except ValueError as error:  # NumPy: "inhomogeneous shape"
        raise TypeError(
            f"{where}: nested lists of different lengths; a feature is one list of values "
            f"(flatten it, or write one feature per inner list). Got: {value!r}"
        ) from error
    flat = values.ravel().tolist()
    if not flat:
        return None, []
    if values.dtype.kind in "biu":
        outside = [v for v in flat if not INT64_MIN <= int(v) <= INT64_MAX]
        if outside:
            raise _outside_int64(where, outside[0])
        return _INT64_LIST, [int(v) for v in flat]
    if values.dtype.kind == "f":
        return _FLOAT_LIST, flat
    if values.dtype.kind in "SUO":
        if all(isinstance(v, int) and not isinstance(v, bool) for v in flat):
            raise _outside_int64(where, flat[0])  # ints NumPy holds in no integer type
        if all(isinstance(v, (str, bytes)) for v in flat):
            return _BYTES_LIST, [v.encode("utf-8") if isinstance(v, str) else v for v in flat]
    raise TypeError(
        f"{where}: expected int, float, str/bytes or a list/array of them (not mixed). "
        f"Got: {value!r} ({values.dtype})"
    )


def _rows_to_examples(rows: list[Mapping[str, Any]]) -> list[bytes]:
    converted: list[dict[str, tuple[Optional[int], list]]] = []
    kinds: dict[str, int] = {}
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"`rows` must hold dicts {{feature: value}}. Row {index} is: {row!r}")
        entry = {}
        for key, value in row.items():
            kind, values = _value_kind(value, key, index)
            if kind is not None:
                seen = kinds.setdefault(key, kind)
                if (seen == _BYTES_LIST) != (kind == _BYTES_LIST):
                    raise TypeError(
                        f"Row {index}, feature {key!r}: {_KIND_NAMES[kind]} value {value!r}, "
                        f"but earlier rows hold {_KIND_NAMES[seen]}."
                    )
                kinds[key] = max(seen, kind)  # an int column with some floats holds floats
            entry[str(key)] = (kind, values)
        converted.append(entry)
    for key, kind in kinds.items():
        rounded = [
            v
            for entry in converted
            if kind == _FLOAT_LIST and entry.get(key, (None,))[0] == _INT64_LIST
            for v in entry[key][1]
            if abs(v) > _FLOAT32_EXACT_INTS and int(np.float32(v)) != v
        ]
        if rounded:
            tf.logging.warning(
                "write_tfrecord: feature %r holds floats in some rows, so all its values are "
                "written as float32, which holds every integer only up to 2**24; %d int "
                "value(s) are rounded (e.g. %d). Write ids as ints only, or as strings.",
                *(key, len(rounded), rounded[0]),
            )
    lists = [("int64_list", tf2.train.Int64List), ("float_list", tf2.train.FloatList)]
    lists.append(("bytes_list", tf2.train.BytesList))
    examples = []
    for entry in converted:
        features = {}
        for key, (_, values) in entry.items():
            field, make = lists[kinds.get(key, _FLOAT_LIST)]
            features[key] = tf2.train.Feature(**{field: make(value=values)})
        examples.append(tf2.train.Example(features=tf2.train.Features(feature=features)))
    return [example.SerializeToString() for example in examples]


def write_tfrecord(
    rows: Union[Iterable[Mapping[str, Any]], Any],
    path: Union[str, os.PathLike],
    *,
    num_shards: int = 1,
    compression: Optional[str] = None,
) -> list[str]:
    """Writes dict rows as ``tf.train.Example`` records into one or more TFRecord shards.

    Ints and bools → ``int64_list``, floats → ``float_list`` (a key with ints and floats too;
    a warning names ints float32 rounds), ``str`` / ``bytes`` → ``bytes_list``; lists and arrays
    give multi-valued features. Rows are dealt round-robin over the shards.

    Args:
      rows: an iterable of dicts ``{feature: value}`` or a pandas DataFrame (one row each).
      path: the output file; with ``num_shards > 1`` the shards ``PATH-00000-of-0000N`` ….
      num_shards: how many files to write.
      compression: None, ``"GZIP"`` or ``"ZLIB"``.

    Returns:
      The paths written, in shard order.

    Raises:
      ValueError: a bad ``num_shards`` or ``compression``, an int outside int64.
      TypeError: a row that is not a dict; a value that is None, ragged or of another type; a
        key holding numbers in some rows and strings in others.

    Example:

        paths = write_tfrecord([{"age": 39, "city": "Oslo", "label": 1}], "/tmp/d.tfr")
    """
    num_shards = check_int("num_shards", num_shards)
    compression = _check_compression(compression)
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        rows = rows.to_dict("records")
    serialized = _rows_to_examples(list(rows))
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        tf2.io.gfile.makedirs(directory)
    paths = [f"{path}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]
    paths = [path] if num_shards == 1 else paths
    options = tf2.io.TFRecordOptions(compression_type=compression or "")
    for shard, shard_path in enumerate(paths):
        with tf2.io.TFRecordWriter(shard_path, options) as writer:
            for record in serialized[shard::num_shards]:
                writer.write(record)
    tf.logging.info(
        "write_tfrecord: %d examples in %d file(s) at %s", len(serialized), len(paths), path
    )
    # Shards of an earlier write with another num_shards: the pattern PATH-* would read them.
    shard_name = re.compile(re.escape(os.path.basename(path)) + r"-\d{5}-of-\d{5}")
    fresh = {os.path.basename(p) for p in paths}
    stale = [
        n
        for n in sorted(tf2.io.gfile.listdir(directory or "."))
        if shard_name.fullmatch(n) and n not in fresh
    ]
    if stale:
        tf.logging.warning(
            "write_tfrecord: %d shard(s) of %s from an earlier write with another num_shards "
            "remain (%s): the pattern %s-* reads them too. Read the paths write_tfrecord "
            "returns, or delete those files.",
            *(len(stale), path, ", ".join(stale[:3]) + (", ..." if len(stale) > 3 else ""), path),
        )
    return paths
