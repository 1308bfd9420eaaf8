"""What tfest_kit checks in data files before tf.data reads them, where the official readers
fail late (mid-training) or name no file: patterns, CSV rows and column types, TFRecord shards
and their first ``tf.train.Example``. Each check has a test in tests/test_inputs.py; the
``test_official_*`` ones show the gap in the unwrapped API. Used by :mod:`tfest_kit.inputs`.
"""

from __future__ import annotations

import collections
import csv
import gzip
import io
import os
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np

from tfest_kit._errors import TfestKitError
from tfest_kit._tf import tf, tf2

__all__ = ["DataError", "check_csv", "check_feature_spec", "check_tfrecords", "glob_files"]

FilePattern = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class DataError(TfestKitError, ValueError):
    """The data does not match what the builder was told: missing files, columns or keys, bad rows.

    A ``ValueError`` too, so ``except ValueError`` keeps working for callers that do not know it.
    """


def _describe_dir(directory: str) -> str:
    directory = directory or "."
    if not tf2.io.gfile.isdir(directory):
        return f"directory {directory!r} does not exist"
    entries = sorted(tf2.io.gfile.listdir(directory))
    more = f" … and {len(entries) - 20} more" if len(entries) > 20 else ""
    return f"directory {directory!r} contains: {', '.join(entries[:20]) or 'nothing'}{more}"


def _directory_error(pattern: str, directory: str, matched: list[str]) -> DataError:
    # The readers call a directory "the file is empty" or fail with "Is a directory".
    if os.path.normpath(pattern) == os.path.normpath(directory):
        what, where = "is a directory", os.path.join(directory, "*")
    else:
        what, where = f"matches the directory {directory!r}", pattern
    files = [m for m in matched if not tf2.io.gfile.isdir(m)] or tf2.io.gfile.glob(where)
    extensions = collections.Counter(os.path.splitext(f)[1] for f in files)
    extension = max(extensions, key=lambda e: (bool(e), extensions[e]), default="")
    return DataError(
        f"`file_pattern` {pattern!r} {what}, not files: pass a pattern that matches files only, "
        f"such as {os.path.join(os.path.dirname(where), '*' + extension)!r}; "
        f"{_describe_dir(directory)}."
    )


def glob_files(file_pattern: FilePattern) -> list[str]:
    """The files one pattern or a list of them match; DataError for none or a directory."""
    if isinstance(file_pattern, (str, os.PathLike)):
        patterns = [os.fspath(file_pattern)]
    elif isinstance(file_pattern, Sequence) and file_pattern:
        patterns = [os.fspath(p) for p in file_pattern]
    else:
        raise TypeError(
            "`file_pattern` must be a path / glob pattern or a non-empty list of them. "
            f"Got: {file_pattern!r}"
        )
    files: dict[str, None] = {}  # ordered and fast for 20,000 shards
    for pattern in patterns:
        matched = sorted(tf2.io.gfile.glob(pattern))
        if not matched:
            raise DataError(
                f"`file_pattern` {pattern!r} matches no file; "
                f"{_describe_dir(os.path.dirname(pattern))}."
            )
        for match in matched:
            if tf2.io.gfile.isdir(match):
                raise _directory_error(pattern, match, matched)
        files.update(dict.fromkeys(matched))
    return list(files)


# --------------------------------------------------------------------------- CSV

# What reading a file with the wrong compression or encoding raises, from gzip, zlib or codecs.
_READ_ERRORS = (OSError, EOFError, zlib.error, UnicodeDecodeError)


def _lines(path: str, compression: Optional[str]):
    """The text lines of a CSV file; a read error becomes a DataError naming the file and fix."""
    try:
        if compression == "GZIP":
            handle = gzip.open(tf2.io.gfile.GFile(path, "rb"), "rt", newline="")
        elif compression == "ZLIB":
            raw = zlib.decompress(tf2.io.gfile.GFile(path, "rb").read()).decode("utf-8")
            handle = io.StringIO(raw, newline="")
        else:
            handle = tf2.io.gfile.GFile(path, "r")
        with handle:
            yield from handle
    except _READ_ERRORS as error:
        with tf2.io.gfile.GFile(path, "rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
        if gzipped and compression != "GZIP":
            fix = "it is GZIP-compressed: pass compression='GZIP'"
        elif compression is not None:
            fix = f"check that it is {compression}-compressed, or pass compression=None"
        elif isinstance(error, UnicodeDecodeError):
            fix = "it is not UTF-8 text: save it as UTF-8"
        else:
            fix = "check that it is a CSV text file"
        raise DataError(
            f"{path}: cannot read it (compression={compression!r}): {fix}. ({error})"
        ) from error


_INT32, _INT64, _FLOAT, _STRING = range(4)  # column kinds, in the order they widen


# What CsvDataset parses (probed against TF 2.15): Python's int() / float() also take "1_000",
# non-ASCII digits, "+1" as an int and "infinity", which CsvDataset rejects at the first batch.
_INT_CELL = re.compile(r"-?[0-9]+")


_FLOAT_CELL = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf)", re.IGNORECASE
)


def _cell_kind(value: str) -> int:
    if _INT_CELL.fullmatch(value):
        number = int(value)  # ids and timestamps overflow int32
        if INT32_MIN <= number <= INT32_MAX:
            return _INT32
        return _INT64 if INT64_MIN <= number <= INT64_MAX else _FLOAT
    return _FLOAT if _FLOAT_CELL.fullmatch(value) else _STRING


class _Column:
    """What the scan saw of one column: its kind and its non-numeric fields (a few kept)."""

    def __init__(self):
        self.kind: Optional[int] = None  # None: no value seen yet
        self.numbers = self.texts = 0
        self.first: Optional[tuple[str, int, str]] = None  # (path, line, field) of the first text
        self.tokens: dict[str, int] = {}  # up to five distinct texts and their counts
        self.only_first_rows = True  # every text is in the first row of its file

    def add(self, cell: str, path: str, line: int, first_row: bool) -> None:
        kind = _cell_kind(cell.strip())
        self.kind = kind if self.kind is None else max(self.kind, kind)
        if kind != _STRING:
            self.numbers += 1
            return
        self.texts += 1
        self.first = self.first or (path, line, cell)
        if cell in self.tokens or len(self.tokens) < 5:
            self.tokens[cell] = self.tokens.get(cell, 0) + 1
        self.only_first_rows = self.only_first_rows and first_row


def _duplicates(names: Sequence[str]) -> list[str]:
    return sorted(name for name, count in collections.Counter(names).items() if count > 1)


def _header(reader, path: str, names: Optional[list[str]], first_file: tuple) -> list[str]:
    """The columns a file's header line names, checked against ``names`` and the first file's."""
    head = next(reader, None)
    if head is None:
        raise DataError(f"{path}: the file is empty but `header=True` expects a header.")
    head = [h.strip() for h in head]
    head[0] = head[0].lstrip("\ufeff")  # spreadsheet programs start UTF-8 files with a BOM
    if names is None and _duplicates(head):
        # CsvDataset selects columns by strictly increasing index: it fails at the first batch.
        raise DataError(
            f"{path}:1: header repeats the column names {_duplicates(head)}; rename them in the "
            "file, or pass unique `column_names` (the header line is still skipped)."
        )
    if names is not None and len(head) != len(names):
        raise DataError(
            f"{path}:1: header has {len(head)} columns {head}, expected {len(names)}: {names}."
        )
    first_path, first_head = first_file
    if first_head and head != first_head:  # columns are read by position: no silent mix-up
        raise DataError(
            f"{path}:1: header {head} differs from {first_path}'s {first_head}; "
            "all files must have the same columns in the same order."
        )
    return head


def _scan_csv(files, names, header, delim, compression, max_rows, na_value):
    """Checks the header and every row's width (``max_rows`` per file), sees each column.

    Returns:
      (column names, a :class:`_Column` per column).
    """
    if names is not None and _duplicates(names):
        raise ValueError(
            "`column_names` must be unique; rename the repeated ones. "
            f"Got: {names} (repeated: {_duplicates(names)})"
        )
    first_file, columns = (files[0], None), None
    for path in files:
        reader = csv.reader(_lines(path, compression), delimiter=delim)
        if header:
            head = _header(reader, path, names, first_file)
            names, first_file = names or head, (files[0], first_file[1] or head)
        for index, row in enumerate(reader):
            line = reader.line_num
            if not row:  # CsvDataset reads it as a one-field record and fails mid-training
                raise DataError(f"{path}:{line}: blank line; remove it (CSV rows only).")
            if names is None:
                raise ValueError(
                    "`column_names` is required when `header=False`. Got: None "
                    f"(the first row of {path} has {len(row)} fields)."
                )
            if len(row) != len(names):
                raise DataError(
                    f"{path}:{line}: row has {len(row)} fields, expected {len(names)} "
                    f"({', '.join(names)}). Row: {delim.join(row)!r}"
                )
            columns = columns or [_Column() for _ in names]
            for column, cell in zip(columns, row):
                if cell.strip() and cell != na_value:  # empty: the default, no type
                    column.add(cell, path, line, index == 0)
            if max_rows is not None and index + 1 >= max_rows:
                break
    if names is None:
        raise ValueError("`column_names` is required when `header=False`. Got: None")
    return names, columns or [_Column() for _ in names]


# The missing-value markers pandas reads as NaN by default, and the "?" of the UCI datasets.
_MISSING_MARKERS = frozenset(
    ["#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA"]
    + ["NULL", "None", "n/a", "null", "?"]
)


def _stray_text(column: _Column, header: bool) -> bool:
    """Whether an inferred column is numeric but for a few fields (or a header line)."""
    if not column.numbers or not column.texts:
        return False
    if not header and column.only_first_rows:
        return True  # header=False on a file with a header
    # Numbers and one missing-value marker, however often: a numeric column with gaps.
    if len(column.tokens) == 1 and next(iter(column.tokens)).strip() in _MISSING_MARKERS:
        return True
    return column.numbers > column.texts  # a string column may hold a few numbers


def _check_numeric(name: str, column: _Column, default: Any, user_set: bool, header: bool):
    """DataError for a numeric column read with non-numeric fields.

    Inferred, it would become a string column and fail far from the file ("Pack Op have types
    [string, float32]"); with a numeric default CsvDataset fails at the first batch, naming no
    file.
    """
    if user_set:
        text_default = isinstance(default, (str, bytes)) or (
            isinstance(default, tf2.dtypes.DType) and default == tf2.string
        )
        if not column.texts or text_default:
            return
    elif not _stray_text(column, header):
        return
    path, line, token = column.first
    as_strings = f"column_defaults={{{name!r}: ''}}"
    if not header and column.only_first_rows:
        raise DataError(
            f"{path}:{line}: column {name!r} holds numbers but its first row is {token!r}, "
            f"which looks like a header line; pass header=True to skip it (or {as_strings} "
            "if the column holds strings)."
        )
    seen = ""
    if column.texts > 1:
        listed = ", ".join(f"{t!r} {n}x" for t, n in column.tokens.items())
        seen = f" ({column.texts} non-numeric fields in the rows read: {listed})"
    raise DataError(
        f"{path}:{line}: column {name!r} holds numbers but also {token!r}{seen}; if it marks a "
        f"missing value pass na_value={token!r} or leave the field empty, else fix the file or "
        f"pass {as_strings} to read the column as strings."
    )


_DEFAULT_TYPES = (tf2.dtypes.DType, int, np.integer, float, np.floating, str, bytes)


def _csv_defaults(names, columns, column_defaults) -> tuple[list[Any], set[int]]:
    """One default per column (inferred where not given) and the columns the caller typed."""
    # A column with no value in the rows read is float: it parses ints and floats further down.
    kinds = [_FLOAT if c.kind is None else c.kind for c in columns]
    inferred = [[0, np.int64(0), 0.0, ""][k] for k in kinds]
    if column_defaults is None:
        return inferred, set()
    if isinstance(column_defaults, Mapping):
        unknown = sorted(set(column_defaults) - set(names))
        if unknown:
            raise DataError(
                f"`column_defaults` names columns {unknown} that are not in the data; "
                f"columns are: {names}."
            )
        given = {names.index(n) for n in column_defaults}
        return [column_defaults.get(n, d) for n, d in zip(names, inferred)], given
    defaults = list(column_defaults)
    if len(defaults) != len(names):
        raise ValueError(
            f"`column_defaults` must have one entry per column ({len(names)}: {names}). "
            f"Got {len(defaults)}: {defaults!r}"
        )
    return defaults, set(range(len(names)))


def _check_default(name: str, default: Any) -> None:
    # Checked when the builder is called, not when train() builds the input_fn's graph.
    if isinstance(default, (bool, np.bool_)) or not isinstance(default, _DEFAULT_TYPES):
        raise TypeError(
            f"`column_defaults` for column {name!r} must be an int, float, str or a tf "
            f"dtype. Got: {default!r} ({type(default).__name__})"
        )
    if isinstance(default, (int, np.integer)) and not INT64_MIN <= default <= INT64_MAX:
        raise ValueError(
            f"`column_defaults` for column {name!r} is outside int64, the widest integer "
            f"column: pass a float or a string default. Got: {default!r}"
        )


def check_csv(files, column_names, label_name, select_columns, column_defaults, scan):
    """(column indices read, their names, their defaults), all checked against the data.

    ``scan`` is ``(header, field_delim, compression, max_rows, na_value)``.
    """
    names, columns = _scan_csv(files, None if column_names is None else list(column_names), *scan)
    if label_name is not None and label_name not in names:
        raise DataError(
            f"`label_name` {label_name!r} is not a column of {files[0]}; columns are: {names}."
        )
    defaults, given = _csv_defaults(names, columns, column_defaults)
    wanted = list(names) if select_columns is None else list(select_columns)
    missing = [c for c in wanted if c not in names]
    if missing:
        raise DataError(f"`select_columns` {missing} not in the data; columns are: {names}.")
    if label_name is not None and label_name not in wanted:
        wanted.append(label_name)
    indices = sorted(names.index(c) for c in wanted)  # a column left out may hold anything
    for i in indices:
        _check_default(names[i], defaults[i])
    for i in indices:
        _check_numeric(names[i], columns[i], defaults[i], i in given, header=scan[0])
    return indices, [names[i] for i in indices], [defaults[i] for i in indices]


# --------------------------------------------------------------------------- TFRecord

_LIST_OF_DTYPE = {tf2.int64: "int64_list", tf2.float32: "float_list", tf2.string: "bytes_list"}


_DTYPE_OF_LIST = {"int64_list": "tf.int64", "float_list": "tf.float32", "bytes_list": "tf.string"}


def _mismatch(key: str, config: Any, feature) -> Optional[str]:
    """What makes one stored feature unparseable with its spec entry, or None."""
    checked = (tf2.io.FixedLenFeature, tf2.io.VarLenFeature, tf2.io.FixedLenSequenceFeature)
    kind = feature.WhichOneof("kind")
    if not isinstance(config, checked) or config.dtype not in _LIST_OF_DTYPE or kind is None:
        return None
    if kind != _LIST_OF_DTYPE[config.dtype]:
        return (
            f"{key!r} is stored as {kind} but the spec asks for {config.dtype.name}: store "
            f"{config.dtype.name} values or ask for {_DTYPE_OF_LIST[kind]}"
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
    """DataError for an Example that lacks a required key or stores one parse_example refuses.

    parse_example would fail mid-training, naming neither the file nor the fix.
    """
    example = tf2.train.Example.FromString(record)
    present = example.features.feature
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
    if found and found[1] == "truncated":
        problem = f"it is truncated: the record at byte {found[2]} is cut short"
    elif found and found[2] == "0" and not compression:
        problem = (
            "it does not start with a TFRecord header (if it was written with compression, "
            "pass compression='GZIP' or 'ZLIB')"
        )
    elif found:
        problem = f"it is corrupt: the bytes at {found[2]} are not a whole record (bad checksum)"
    else:
        return DataError(
            f"{path}: cannot read a tf.train.Example (compression={compression!r}): {error}"
        )
    return DataError(
        f"{path}: {problem}. An interrupted copy or write leaves a file like this; "
        "copy or write it again, or leave it out of `file_pattern`."
    )


def check_tfrecords(
    files: list[str], spec: Mapping[str, Any], compression: Optional[str], whole: bool = True
):
    """Reads every local shard once with TensorFlow's reader (``whole``); checks the first example.

    TFRecordDataset meets a cut shard only when training reaches its end, and its message names
    no file (test_official_tfrecord_dataset_finds_a_cut_shard_only_at_its_end_without_its_name).
    The C++ reader is fast (12,000 records, 3.6 MB: 15 ms); remote shards are not read whole.
    """
    options = tf.io.TFRecordOptions(compression or "")
    first = None
    for path in files:
        if first is not None and ("://" in path or not whole):
            continue
        try:
            for record in tf.io.tf_record_iterator(path, options=options):
                if first is None:
                    first = path
                    _check_example(path, record, spec)
                if "://" in path or not whole:
                    break
        except DataError:
            raise
        except Exception as error:  # noqa: BLE001 - a damaged file, or the wrong compression
            raise _damage(path, error, compression) from error
    if first is None:
        raise DataError(f"No file matched by the pattern holds any example: {files}")


def check_feature_spec(feature_spec: Any, label_key: Optional[str]) -> dict:
    if not isinstance(feature_spec, Mapping) or not feature_spec:
        error = ValueError if isinstance(feature_spec, Mapping) else TypeError
        raise error(
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
