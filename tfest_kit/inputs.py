"""``input_fn`` builders over tf.data: NumPy / pandas, CSV, TFRecord of ``tf.train.Example``.

Each returns ``input_fn(params=None)``; the Estimator's ``params["batch_size"]`` wins. Files are
read by the official ``make_csv_dataset`` / ``make_batched_features_dataset``; only when they
fail, :func:`read_errors` scans them and names the file, line or record, column and fix.
"""

import codecs
import contextlib
import csv
import functools
import gzip
import itertools
import os
import re
import threading
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from tfest_kit._checks import TfestKitError, check_int
from tfest_kit._tf import tf, tf2

__all__ = ["InputFileError", "from_arrays", "from_csv", "from_tfrecord", "write_tfrecord"]

AUTOTUNE = tf2.data.AUTOTUNE
InputFn = Callable[..., Any]
FilePattern = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]
_DEFAULT_SHUFFLE_BUFFER = 10_000
_FILES_AT_ONCE = 8  # files read at once while shuffling: the buffer then mixes several shards
# Arrays up to this many bytes become graph constants; Estimator writes the graph into
# graph.pbtxt, events and every .meta (40 MB of data made 300 MB of files), capped at 2 GB.
# Larger arrays stay in this process, looked up a batch at a time (as numpy_input_fn did).
_EMBEDDED_ARRAYS_LIMIT = 16 << 20
# write_tfrecord's feature list of each NumPy dtype kind.
_KINDS = {"b": "int64", "i": "int64", "u": "int64", "f": "float", "S": "bytes", "U": "bytes"}
# Per graph, scan(message) -> where in its files (or None), for each from_csv / from_tfrecord
# input_fn in it. Not a graph collection, which a checkpoint's .meta would warn about.
_SCANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CUT_CHECKED, _CUT_CHECKED_LOCK = set(), threading.Lock()  # (path, size, mtime) of TFRecord files


class InputFileError(TfestKitError):
    """A record TensorFlow could not read, named by file, line or record, and column; raised as
    the ``tf.errors`` class TensorFlow raised too, so code catching that still does. Raised by
    tfest_kit's estimators and ``train_and_evaluate`` (a plain Estimator's raise TensorFlow's)."""


class InvalidInputFileError(InputFileError, tf.errors.InvalidArgumentError):
    """A field or record that does not decode (``InvalidArgumentError``)."""


class DamagedInputFileError(InputFileError, tf.errors.DataLossError):
    """A damaged, cut or compressed file (``DataLossError``)."""


@contextlib.contextmanager
def read_errors() -> Iterator[None]:
    """Re-raises a decode error of a file read by :func:`from_csv` / :func:`from_tfrecord` as an
    :class:`InputFileError` naming where it is; other errors pass."""
    try:
        yield
    except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as e:
        from_input = "GetNext" in getattr(e.op, "type", "")  # not a checkpoint, a model op
        scans = _SCANS.get(e.op.graph, ()) if from_input else ()
        if (where := next(filter(None, (scan(e.message) for scan in scans)), None)) is None:
            raise
        lost = isinstance(e, tf.errors.DataLossError)
        lines = [line for line in e.message.splitlines() if line and not line[0].isspace()]
        error = DamagedInputFileError if lost else InvalidInputFileError
        raise error(e.node_def, None, f"{where} [TensorFlow: {lines[-1]}]") from None


def _scan_on_error(scan: Callable[[str], Optional[str]]) -> None:
    if not tf.executing_eagerly():  # an eager dataset's errors are not re-raised
        _SCANS.setdefault(tf.get_default_graph(), []).append(scan)


def _files(patterns: Union[str, list[str]]) -> list[str]:
    patterns = [patterns] if isinstance(patterns, str) else patterns
    return sorted({path for pattern in patterns for path in tf.io.gfile.glob(pattern)})


def _each_matches(patterns: Union[str, list[str]]) -> None:  # TensorFlow reads the others
    for pattern in [] if isinstance(patterns, str) else patterns:
        if not tf.io.gfile.glob(pattern):
            raise FileNotFoundError(f"No file matches {pattern!r} of `file_pattern` {patterns}.")


def _compressed_as(path: str) -> Optional[str]:
    with tf.io.gfile.GFile(path, "rb") as f:
        return {b"\x1f\x8b": "GZIP", b"x\x9c": "ZLIB"}.get(f.read(2))


def _check_common(batch_size: int, num_epochs: Optional[int], shuffle_buffer: Optional[int]):
    check_int("batch_size", batch_size)
    check_int("num_epochs", num_epochs, allow_none=True, hint="None repeats forever")
    check_int("shuffle_buffer", shuffle_buffer, allow_none=True)


def _batch_size(batch_size: int, params: Optional[Mapping]) -> int:
    if params and params.get("batch_size") is not None:
        # Estimator(params=...) hands params over unchecked; batch(0) or batch(8.9) fail late.
        return check_int("params['batch_size']", params["batch_size"], hint="from params")
    return batch_size


def _patterns(file_pattern: FilePattern) -> Union[str, list[str]]:
    one = isinstance(file_pattern, (str, os.PathLike))
    patterns = [os.fspath(pattern) for pattern in ([file_pattern] if one else file_pattern)]
    for pattern in filter(tf.io.gfile.isdir, patterns):  # TensorFlow: "Is a directory", late
        raise IsADirectoryError(f"`file_pattern` {pattern!r} is a directory: pass '{pattern}/*'")
    for i, pattern in enumerate(patterns):  # a file or directory "lr[0.1]": TensorFlow globs
        part = pattern if tf.io.gfile.exists(pattern) else os.path.dirname(pattern)
        if re.search(r"[*?[\\]", part) and tf.io.gfile.exists(part):
            patterns[i] = re.sub(r"[*?[\\]", r"\\\g<0>", part) + pattern[len(part) :]
    return patterns[0] if one else patterns


def _compression(compression: Optional[str]) -> Optional[str]:  # as TensorFlow takes it
    if compression and str(compression).upper() not in ("GZIP", "ZLIB"):
        raise ValueError(f"`compression` must be None, 'GZIP' or 'ZLIB'. Got: {compression!r}")
    return compression and compression.upper()


def _is_pandas(value: Any) -> bool:
    return hasattr(value, "index") and hasattr(value, "iloc")


def _tf_friendly(value: Any, name: str) -> np.ndarray:
    try:
        array = np.asarray(value)
    except ValueError as e:  # NumPy: "... has an inhomogeneous shape after 1 dimensions"
        raise ValueError(f"Feature {name!r} is ragged (rows of different lengths): pad it") from e
    if array.dtype.kind in "mM":  # TensorFlow: "Cannot convert ... to a TensorFlow DType"
        raise TypeError(f"Feature {name!r} holds {array.dtype}: convert it to numbers or text")
    if array.dtype.kind == "f" and not np.isfinite(array.sum(dtype=np.float64)):  # no copy
        row = int(np.nonzero(~np.isfinite(np.atleast_1d(array)))[0][0])
        tf.logging.warning(f"Feature {name!r} holds NaN or inf (first: row {row}): fill or drop")
    if array.dtype == np.float64:
        # Keras layers and feature columns compute in float32; float64 input only costs casts.
        return array.astype(np.float32)
    if array.dtype == object:
        if odd := [v for v in array.ravel() if not isinstance(v, (str, bytes))]:
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
        feats = {str(col): _tf_friendly(features[col].to_numpy(), str(col)) for col in features}
    elif isinstance(features, Mapping) and features:
        feats = {str(k): _tf_friendly(v, str(k)) for k, v in features.items()}
    elif isinstance(features, Mapping):
        raise ValueError("`features` must not be an empty dict.")
    elif isinstance(features, (np.ndarray, list, tuple)):
        feats = {feature_name: _tf_friendly(features, feature_name)}
    else:
        raise TypeError(
            "`features` must be a dict of arrays, a NumPy array or a pandas DataFrame. "
            f"Got: {type(features).__name__}"
        )
    if isinstance(labels, str):
        if labels not in feats:
            raise ValueError(f"Label column {labels!r} is not in `features` {sorted(feats)}")
        label_array = feats.pop(labels)  # checked as a feature, under its name
        if not feats:
            raise ValueError("`features` has no column left once the label column is removed.")
    else:
        label_array = None if labels is None else _tf_friendly(labels, "labels")
    if label_array is not None and label_array.ndim == 0:  # a DataFrame's column 4 is "4"
        raise ValueError(f"`labels` must be an array or a str of {sorted(feats)}. Got: {labels!r}")
    named = {**feats, "<labels>": label_array} if label_array is not None else feats
    lengths = {k: (len(v) if v.ndim else -1) for k, v in named.items()}
    if len(set(lengths.values())) != 1 or -1 in lengths.values() or 0 in lengths.values():
        raise ValueError(
            "All feature arrays and the labels must have the same number (>= 1) of rows. "
            f"Got rows per key: {lengths}"
        )
    return feats, label_array, next(iter(lengths.values()))


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

    Unlike ``numpy_input_fn`` / ``pandas_input_fn`` (queue runners), gives a ``Dataset`` (which
    ``TPUEstimator`` needs) and ``drop_remainder``. ``float64`` is fed as ``float32``; arrays over
    16 MB stay in this process, so the ``input_fn`` runs only where it was built.

    Args:
      features: a dict ``{name: array}``, a DataFrame or one array (the feature ``feature_name``).
      labels: one label per row (array or Series with the DataFrame's index), the name of a
        column of ``features``, or None (prediction).
      batch_size: examples per batch unless ``params["batch_size"]`` is given.
      shuffle: shuffle the rows (False for evaluation and prediction).
      num_epochs: passes over the data; None repeats forever.
      shuffle_buffer: shuffle buffer size; default: all rows, at most 10,000.
      drop_remainder: drop the last, smaller batch (static batch shapes, TPU style).
      seed: shuffle seed.
      feature_name: the key a bare array ``features`` gets.

    Returns:
      ``input_fn(params=None)``: a ``Dataset`` of ``(features, labels)`` or ``features`` batches.

    Raises:
      ValueError: ``labels`` names no column of ``features``; rows or pandas indexes that
        differ; a bad argument or ``params["batch_size"]``.
      TypeError: ``features`` of an unsupported type.

    Example:

        train_fn = from_arrays(df, "target", batch_size=64, num_epochs=None)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    feats, label_array, num_rows = _arrays(features, labels, feature_name)
    buffer = shuffle_buffer or min(num_rows, _DEFAULT_SHUFFLE_BUFFER)
    data = feats if label_array is None else (feats, label_array)
    embedded = sum(array.nbytes for array in tf2.nest.flatten(data)) <= _EMBEDDED_ARRAYS_LIMIT

    def input_fn(params=None):
        if embedded:
            ds = tf2.data.Dataset.from_tensor_slices(data)
        else:  # row numbers, looked up batch by batch
            ds = tf2.data.Dataset.range(num_rows)
        if shuffle:  # before repeat: each epoch sees each row once
            ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
        size = _batch_size(batch_size, params)
        ds = ds.repeat(num_epochs).batch(size, drop_remainder=drop_remainder)
        if not embedded:
            ds = ds.map(functools.partial(_rows_of, data), num_parallel_calls=AUTOTUNE)
        return ds.prefetch(AUTOTUNE)

    return input_fn


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
    seed: Optional[int] = None,
) -> InputFn:
    """Builds an ``input_fn`` over CSV files with ``tf.data.experimental.make_csv_dataset``.

    Column types are inferred from the first 100 rows unless ``column_defaults`` gives them.
    Unshuffled files are read in sorted order; with ``num_epochs=None`` every batch is full.

    Args:
      file_pattern: a path, glob pattern or list of them (``"data/train-*.csv"``).
      column_names: the column names; default: the header line of the first file.
      label_name: the column to return as the label, or None for features only.
      column_defaults: one entry per column read, or a dict for some columns: a value (``0``,
        ``""``) fills empty fields, a dtype (``tf.float32``) makes the column required (the
        label's is, unless given here).
      select_columns: read only these columns (the label among them).
      header: whether each file starts with a header line (skipped; one that looks like a row
        is warned of, and False refused for a first line equal to ``column_names``).
      field_delim: the field separator.
      na_value: a string that stands for a missing value.
      compression: None, ``"GZIP"`` or ``"ZLIB"``.
      batch_size, shuffle, num_epochs, shuffle_buffer, seed: as in :func:`from_arrays` (default
        buffer: 10,000 rows; 8 files read at once while shuffling).

    Returns:
      ``input_fn(params=None)``: a ``Dataset`` of ``(features, label)`` or ``features`` batches.

    Raises:
      ValueError: a bad argument or ``params["batch_size"]``; ``column_defaults`` naming a column
        not read; no row; ``make_csv_dataset``'s errors, with file and line.
      InputFileError: while training or evaluating, a row that does not decode.
      FileNotFoundError: a pattern of a list that matches no file.

    Example:

        train_fn = from_csv("/tmp/iris/train.csv", label_name="species", num_epochs=None)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    options = dict(column_names=column_names, select_columns=select_columns, header=header)
    compression = _compression(compression)
    options.update(field_delim=field_delim, na_value=na_value, compression_type=compression)
    patterns = _patterns(file_pattern)
    files, first_line = _files(patterns), b""
    if files and not compression:
        with tf.io.gfile.GFile(files[0], "rb") as f:
            first_line = f.readline()
    first_text = first_line.removeprefix(codecs.BOM_UTF8).decode(errors="replace")
    first = next(csv.reader([first_text], delimiter=field_delim), [])
    if header and column_names is None and first_line.startswith(codecs.BOM_UTF8):
        options["column_names"] = first  # else the BOM is kept in the first name
    if not header and column_names and first == list(column_names):
        raise ValueError(
            f"{files[0]} starts with a header line, {first}, that header=False reads as a row: "
            "leave `header` True"
        )
    if header and column_names and first and len(first) != len(column_names):
        raise ValueError(  # else each row was blamed for its field count
            f"{files[0]}'s header has {len(first)} columns, {first}; `column_names` names "
            f"{len(column_names)}: give one name per column (select_columns reads some)"
        )
    if header and column_names and first and all(_parses(field, "float") for field in first):
        tf.logging.warning(
            f"{files[0]}: header=True skips its first line, {first}, which looks like a row: "
            "pass header=False if the files have no header line"
        )
    read = select_columns or options["column_names"] or (first if header else [])
    if isinstance(column_defaults, (list, tuple)) and read and len(column_defaults) != len(read):
        raise ValueError(  # else zipped with the columns: the last ones dropped
            f"`column_defaults` has {len(column_defaults)} entries for the {len(read)} columns "
            f"read, {list(read)}: give one per column, or a dict for some"
        )
    defaults = column_defaults
    if isinstance(column_defaults, Mapping) or (column_defaults is None and label_name):
        defaults = _csv_defaults(patterns, column_defaults or {}, options, label_name)
    reading = dict(label_name=label_name, num_epochs=num_epochs, shuffle=shuffle, shuffle_seed=seed)
    reading["shuffle_buffer_size"] = shuffle_buffer or _DEFAULT_SHUFFLE_BUFFER
    reading["num_parallel_reads"] = _FILES_AT_ONCE if shuffle else 1

    def input_fn(params=None):
        _each_matches(patterns)
        _scan_on_error(functools.partial(_csv_problem, patterns, options))
        given = defaults() if callable(defaults) else defaults
        size = _batch_size(batch_size, params)
        return _csv_dataset(patterns, options, size, column_defaults=given, **reading)

    return input_fn


def _csv_dataset(patterns, options: dict, batch_size: int, **kwargs):
    """``make_csv_dataset``; its type inference's errors, and no row at all, name the file."""
    try:
        ds = tf2.data.experimental.make_csv_dataset(patterns, batch_size, **kwargs, **options)
    except (ValueError, OSError) as e:  # a UnicodeDecodeError, a BadGzipFile too
        if (where := _csv_problem(patterns, options, str(e))) is None:
            raise
        raise ValueError(f"{where} [make_csv_dataset: {e}]") from None
    text = {spec.dtype for spec in tf2.nest.flatten(ds.element_spec)} == {tf2.string}
    if no_rows := text and _csv_problem(patterns, options, ""):  # inferred from no row: all text
        raise ValueError(no_rows)
    return ds


def _csv_rows(files: list[str], options: dict, header: bool) -> Iterator[tuple[str, int, list]]:
    """(file, line number, fields) of each row of the CSV ``files``, header lines left out."""
    gzipped = options["compression_type"] == "GZIP"
    for path in files:
        try:
            with tf.io.gfile.GFile(path, "rb" if gzipped else "r") as f:
                text = gzip.open(f, "rt") if gzipped else f
                reader = csv.reader(text, delimiter=options["field_delim"])
                for fields in itertools.islice(reader, int(header), None):
                    yield path, reader.line_num, fields
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not a CSV file: it is not UTF-8 text") from None


def _csv_problem(patterns, options: dict, message: str) -> Optional[str]:
    """Where the row ``message`` is about is in the CSV files, and its likely fix; or None."""
    files, select = _files(patterns), options["select_columns"]
    compression = options["compression_type"]
    kinds = {f: _compressed_as(f) for f in files}
    wrong = [f for f in files if kinds[f] != compression and (kinds[f] or compression == "GZIP")]
    if wrong:
        kind, fix = kinds[wrong[0]], f"not {compression}-compressed: leave `compression` out"
        fix = f"{kind}-compressed: pass compression={kind!r}" if kind else fix
        return f"{wrong[0]} is {fix}"
    if compression == "ZLIB" or not files:
        return None
    names = options["column_names"] or next(_csv_rows(files, options, False), [[]] * 3)[2]
    other = [d for d in ";\t|" if len(names) == 1 and d in names[0]]
    if other and options["field_delim"] not in other:  # make_csv_dataset: "must be one of"
        return f"{files[0]}: its header {names[0]!r} is one column: pass field_delim={other[0]!r}"
    index = {**{name: i for i, name in enumerate(names)}, **{i: i for i in range(len(names))}}
    columns = sorted(index[c] for c in select or names if c in index)
    rows = _csv_rows(files, options, options["header"])
    if (first := next(rows, None)) is None:
        after = " after the header line" if options["header"] else ""
        return f"{', '.join(files)}: no rows{after}. Point file_pattern at the data"
    field = re.search(r"Field (\d+) (?:in record is not a valid (\w+)|is required)", message)
    if not columns or not (field or "fields" in message):  # "Expect 5 fields but have 3"
        return None
    for path, line, fields in itertools.chain([first], rows):
        if not field and (len(fields) <= columns[-1] or not select and len(fields) != len(names)):
            short = len(fields) < len(names) and f"no field for column {names[len(fields)]!r}"
            return (
                f"{path}:{line}: {len(fields)} fields where the file has {len(names)} columns "
                f"{names} ({short or 'too many fields'}). Each row needs one field per column: "
                f"a missing value is an empty field (a,,c); quote a field that holds "
                f"{options['field_delim']!r}; remove blank lines"
            )
        column, kind = (columns[int(field[1])], field[2]) if field else (len(fields), None)
        value = fields[column] if column < len(fields) else None
        empty = value in ("", options["na_value"])
        if value is not None and (not empty and not _parses(value, kind) if kind else empty):
            what = f"is not a valid {kind}" if kind else "is empty: a label (or dtype) needs one"
            return (
                f"{path}:{line}, column {names[column]!r}: {value!r} {what}. Fix the value, mark "
                "missing values with `na_value`, or set the column's default in column_defaults "
                f"(else typed by the first 100 rows): {{{names[column]!r}: ''}} reads text, 0.0 "
                "a number that may be empty"
            )
    return None


def _parses(text: str, kind: str) -> bool:
    """Whether CsvDataset reads ``text`` as a ``kind`` ("float", "int32" …; Python's: "1_5"), or
    make_csv_dataset's type guess as a number (``kind="number"``: below inf, not NaN)."""
    try:
        value = float(text) if kind in ("float", "double", "number") else int(text)
    except ValueError:
        return False
    in_range = kind != "int32" or -(2**31) <= value < 2**31
    return text.isascii() and "_" not in text and in_range and (kind != "number" or value < np.inf)


def _csv_defaults(patterns, given: Mapping, options: dict, label: Optional[str]) -> Callable:
    """One default per column read: ``given``'s, else a zero of the type make_csv_dataset infers
    (the label's, required: an empty label field was class 0)."""
    with tf2.Graph().as_default():  # the inference reads the files in Python, once
        spec = _csv_dataset(patterns, options, 1).element_spec
    if unknown := sorted(set(given) - set(spec)):
        raise ValueError(
            f"`column_defaults` names columns that are not read: {unknown}; columns: {list(spec)}."
        )
    first_row = f"{_files(patterns)[0]}:{1 + int(options['header'])},"  # a text column's
    for i, (name, column) in enumerate(spec.items()):  # a number column typed as text?
        if column.dtype == tf2.string and name not in given:
            stray = _csv_problem(patterns, options, f"Field {i} in record is not a valid number")
            if stray and not stray.startswith(first_row):
                tf.logging.warning(f"Column {name!r} is read as text: {stray}")
    # Made when called: each input_fn builds its own graph.
    zero = lambda n, dtype: dtype if n == label else tf2.zeros([1], dtype)  # noqa: E731
    return lambda: [given[n] if n in given else zero(n, s.dtype) for n, s in spec.items()]


def from_tfrecord(
    file_pattern: FilePattern,
    feature_spec: Mapping[str, Any],
    label_key: Optional[str] = None,
    *,
    compression: Optional[str] = None,
    batch_size: int = 32,
    shuffle: bool = True,
    num_epochs: Optional[int] = 1,
    shuffle_buffer: Optional[int] = None,
    drop_remainder: bool = False,
    seed: Optional[int] = None,
) -> InputFn:
    """Builds an ``input_fn`` over TFRecord files of serialized ``tf.train.Example``.

    Read by ``make_batched_features_dataset`` (8 files at once while shuffling, else in sorted
    order), which parses each batch.

    Args:
      file_pattern: a path, glob pattern or list of them (``"data/train.tfrecord-*"``).
      feature_spec: ``{key: tf.io.FixedLenFeature | VarLenFeature | …}`` with the label's entry.
      label_key: the key of ``feature_spec`` to return as the label, or None for features only.
      compression: None, ``"GZIP"`` or ``"ZLIB"`` (as written by :func:`write_tfrecord`).
      batch_size, shuffle, num_epochs, shuffle_buffer, drop_remainder, seed: as in
        :func:`from_arrays` (the default buffer: 10,000 records).

    Returns:
      ``input_fn(params=None)``: a ``Dataset`` of ``(features, label)`` or ``features`` batches.

    Raises:
      ValueError: a bad argument or ``params["batch_size"]``; the official reader's errors
        (``label_key`` not in ``feature_spec``, no file matched).
      InputFileError: while training or evaluating, a damaged file or a record not as specified.
      FileNotFoundError: a pattern of a list that matches no file.

    Example:

        spec = {"x": tf.io.FixedLenFeature([4], tf.float32)}
        spec["y"] = tf.io.FixedLenFeature([], tf.int64)
        train_fn = from_tfrecord("/tmp/data/train.tfr-*", spec, "y", num_epochs=None)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    compression = _compression(compression)
    patterns, spec = _patterns(file_pattern), dict(feature_spec)
    reading = dict(label_key=label_key, num_epochs=num_epochs, shuffle=shuffle, shuffle_seed=seed)
    reading["shuffle_buffer_size"] = shuffle_buffer or _DEFAULT_SHUFFLE_BUFFER
    reading["reader_num_threads"] = _FILES_AT_ONCE if shuffle else 1
    reading.update(reader_args=[compression or ""], drop_final_batch=drop_remainder)

    def input_fn(params=None):
        _each_matches(patterns)
        _scan_on_error(functools.partial(_tfrecord_problem, patterns, compression, spec))
        files = _files(patterns)
        if not any(tf.io.gfile.stat(path).length for path in files):  # list_files: ~100 lines
            found = f"only empty files: {', '.join(files)}" if files else "no file"
            raise ValueError(f"`file_pattern` {patterns!r} matches {found}. Point it at the data")
        if not compression:  # beside the reading: ~1 us a record, once per file version
            threading.Thread(target=_warn_if_cut, args=(files,), daemon=True).start()
        size = _batch_size(batch_size, params)
        return tf2.data.experimental.make_batched_features_dataset(patterns, size, spec, **reading)

    return input_fn


def _warn_if_cut(files: list[str]) -> None:
    """Warns of a file cut inside a record's 12-byte header: TensorFlow's reader takes that for
    the end of the file and drops the record without a word (cut elsewhere, it raises)."""
    for path in files:
        try:
            info = os.stat(path)
        except OSError:  # not a local file
            continue
        stamp = (path, info.st_size, info.st_mtime_ns)
        records, offset, header = 0, 0, b""
        with _CUT_CHECKED_LOCK, open(path, "rb") as f:
            while stamp not in _CUT_CHECKED and offset < stamp[1]:
                f.seek(offset)  # only inside the file: a text file's "length" is out of range
                header = f.read(12)  # length (8 bytes) and its checksum; the data's after
                records, offset = records + 1, offset + 16 + int.from_bytes(header[:8], "little")
            _CUT_CHECKED.add(stamp)
        if 0 < len(header) < 12:
            tf.logging.warning(
                f"{path} is cut short inside record {records - 1}: TensorFlow reads the "
                f"{records - 1} whole records before it and ignores the rest. Write the file again"
            )


def _tfrecord_problem(patterns, compression, spec: dict, message: str) -> Optional[str]:
    """The first record of the files that cannot be read, or parsed when ``message`` is about
    parsing (by the official parser, 1,000 records a run), and the likely fix; or None."""
    options, parse = tf.io.TFRecordOptions(compression or ""), "Name: <unknown>" in message
    if not parse and not re.search(r"record at|inflate\(\)", message):  # the files' reader's
        return None
    with tf.Graph().as_default() as graph:
        serialized, names = tf.placeholder(tf.string, [None]), tf.placeholder(tf.string, [None])
        parsed = tf.io.parse_example(serialized, spec, example_names=names)
    for path in _files(patterns):
        records, read = tf.io.tf_record_iterator(path, options), 0
        try:
            while next(records, None) is not None:
                read += 1
        except tf.errors.DataLossError:
            actual, fix = _compressed_as(path), "write the file again, or leave it out"
            if actual != compression and read == 0:
                fix = f"the file is {actual or 'not'}-compressed: pass compression={actual!r}"
            with tf.io.gfile.GFile(path, "rb") as f:  # a record's length starts with NUL bytes
                text = read == 0 and not actual and b"\0" not in f.read(8)
            fix = "it is not a TFRecord file but text (a CSV? use from_csv)" if text else fix
            return f"{path}: record {read} cannot be read (damaged or cut short): {fix}"
        records = tf.io.tf_record_iterator(path, options)
        with tf.Session(graph=graph) as session:
            for start in range(0, read if parse else 0, 1000):
                batch = list(itertools.islice(records, 1000))
                try:
                    numbers = [str(start + i) for i in range(len(batch))]
                    session.run(parsed, {serialized: batch, names: numbers})
                except tf.errors.InvalidArgumentError as e:
                    found = re.search(r"Name: (\d+), (Key: (.*?), Index: \d+\.\s*)?(.*)", e.message)
                    number, key, problem = found.group(1, 3, 4) if found else (start, "", "")
                    return (
                        f"{path}: record {number}{f', feature {key!r}' if key else ''}: "
                        f"{problem.rstrip('.') or 'cannot be parsed'}. The records must fit "
                        "`feature_spec` (keys, dtypes, shapes; a key some lack: a "
                        "FixedLenFeature with a default_value, or a VarLenFeature)"
                    )
    return None


def _rows_to_examples(rows: list[Mapping[str, Any]]) -> list[bytes]:
    arrays, kinds = [], {}  # per key: int64, float (ints with some floats: floats) or bytes
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"`rows` must hold dicts {{feature: value}}. Row {index} is: {row!r}")
        arrays.append({str(key): np.asarray(value).ravel() for key, value in row.items()})
        for (key, values), value in zip(arrays[-1].items(), row.values()):
            kind, seen = _KINDS.get(values.dtype.kind), kinds.get(key)
            if values.size and kind is None:
                raise TypeError(
                    f"Row {index}, feature {key!r}: expected int, float, str/bytes or a list of "
                    f"them. Got: {value!r}"
                )
            if values.size and seen and (seen == "bytes") != (kind == "bytes"):
                raise TypeError(
                    f"Row {index}, feature {key!r}: {kind} value {value!r}, but earlier rows "
                    f"hold {seen}."
                )
            if values.size:
                kinds[key] = "float" if "float" in (seen, kind) else kind
    lists = dict(int64=tf2.train.Int64List, float=tf2.train.FloatList, bytes=tf2.train.BytesList)
    examples = []
    for row in arrays:
        features = {}
        for key, values in row.items():
            kind = kinds.get(key, "float")
            values = [v.encode("utf-8") if isinstance(v, str) else v for v in values.tolist()]
            features[key] = tf2.train.Feature(**{f"{kind}_list": lists[kind](value=values)})
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

    Ints and bools → ``int64_list``, floats (or mixed with ints) → ``float_list``, ``str`` /
    ``bytes`` → ``bytes_list``; lists and arrays are multi-valued. Rows go round-robin to shards.
    Each file is renamed into place when whole: a reader never sees half of one.

    Args:
      rows: an iterable of dicts ``{feature: value}`` or a pandas DataFrame (one row each).
      path: the output file; with ``num_shards > 1`` the shards ``PATH-00000-of-0000N`` …. An
        earlier write of ``path`` with another ``num_shards`` is removed (with a warning).
      num_shards: how many files to write.
      compression: None, ``"GZIP"`` or ``"ZLIB"``.

    Returns:
      The paths written, in shard order.

    Raises:
      ValueError: a bad ``num_shards`` or ``compression``.
      TypeError: a row that is not a dict; a value of another type; a key holding numbers in
        some rows and strings in others.

    Example:

        paths = write_tfrecord([{"age": 39, "city": "Oslo", "label": 1}], "/tmp/d.tfr")
    """
    num_shards, compression = check_int("num_shards", num_shards), _compression(compression)
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        rows = rows.to_dict("records")
    serialized = _rows_to_examples(list(rows))
    path = os.fspath(path)
    if tf2.io.gfile.isdir(path):  # else renaming the written file failed: "Is a directory"
        raise IsADirectoryError(f"`path` must be a file name, not a directory. Got: {path!r}")
    tf2.io.gfile.makedirs(os.path.dirname(path) or ".")
    paths = [f"{path}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]
    paths = [path] if num_shards == 1 else paths
    options = tf2.io.TFRecordOptions(compression_type=compression or "")
    for shard, shard_path in enumerate(paths):
        partial = os.path.join(os.path.dirname(shard_path), f".partial-{uuid.uuid4().hex}")
        try:
            with tf2.io.TFRecordWriter(partial, options) as writer:
                for record in serialized[shard::num_shards]:
                    writer.write(record)
            tf2.io.gfile.rename(partial, shard_path, overwrite=True)
        finally:
            if tf2.io.gfile.exists(partial):
                tf2.io.gfile.remove(partial)
    # An earlier write of `path` with another num_shards: "path-*" would read it with this one.
    directory, name = os.path.split(path)
    ours = re.compile(re.escape(name) + r"(-\d{5}-of-\d{5})?")
    stale = [os.path.join(directory, n) for n in sorted(tf2.io.gfile.listdir(directory or "."))]
    stale = [old for old in stale if ours.fullmatch(os.path.basename(old)) and old not in paths]
    for old in stale:
        tf2.io.gfile.remove(old)
    if stale:
        tf.logging.warning(f"write_tfrecord: removed {stale}, an earlier write of {path!r}")
    tf.logging.info(f"write_tfrecord: {len(serialized)} examples in {len(paths)} file(s) at {path}")
    return paths
