"""The CSV pass of ``inputs.from_csv``: row widths, header and column types, read in Python.

Run before ``CsvDataset`` reads, because ``make_csv_dataset`` names no file:line for a bad
row, reads a numeric column with "NA" as strings, types "1_000" as an int that CsvDataset
refuses, sorts unshuffled files and has no drop_remainder.
"""

from __future__ import annotations

import collections
import csv
import gzip
import io
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from tfest_kit._errors import DataError
from tfest_kit._tf import tf2

__all__ = ["check_csv", "record_default", "INT64_MIN", "INT64_MAX"]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


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
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as error:
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
# The missing-value markers pandas reads as NaN by default, and the "?" of the UCI datasets.
_MISSING_MARKERS = frozenset(
    ["#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA"]
    + ["NULL", "None", "n/a", "null", "?"]
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
        self.kind = None  # None: no value seen yet
        self.numbers = self.texts = 0
        self.first = None  # (path, line, field) of the first text
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

    def check(self, name: str, default: Any, user_set: bool, header: bool) -> None:
        """DataError for a numeric column with non-numeric fields.

        Inferred, it would become a string column and fail far from the file ("Pack Op have
        types [string, float32]"); with a numeric default CsvDataset fails, naming no file.
        """
        if user_set:
            text = isinstance(default, (str, bytes)) or (
                isinstance(default, tf2.dtypes.DType) and default == tf2.string
            )
            if not self.texts or text:
                return
        elif not self.numbers or not self.texts:
            return
        elif header or not self.only_first_rows:  # not a header line read as a row
            # Numbers and one missing-value marker, however often: a numeric column with gaps;
            # else a string column may hold a few numbers.
            marker = len(self.tokens) == 1 and next(iter(self.tokens)).strip() in _MISSING_MARKERS
            if not marker and self.numbers <= self.texts:
                return
        path, line, token = self.first
        as_strings = f"column_defaults={{{name!r}: ''}}"
        if not header and self.only_first_rows:
            raise DataError(
                f"{path}:{line}: column {name!r} holds numbers but its first row is {token!r}, "
                f"which looks like a header line; pass header=True to skip it (or {as_strings} "
                "if the column holds strings)."
            )
        seen = ""
        if self.texts > 1:
            listed = ", ".join(f"{t!r} {n}x" for t, n in self.tokens.items())
            seen = f" ({self.texts} non-numeric fields in the rows read: {listed})"
        raise DataError(
            f"{path}:{line}: column {name!r} holds numbers but also {token!r}{seen}; if it marks "
            f"a missing value pass na_value={token!r} or leave the field empty, else fix the "
            f"file or pass {as_strings} to read the column as strings."
        )


def _duplicates(names: Sequence[str]) -> list[str]:
    return sorted(name for name, count in collections.Counter(names).items() if count > 1)


def _header(reader, path: str, names: Optional[list[str]], first: tuple) -> list[str]:
    """The columns a file's header line names, checked against ``names`` and the first file's."""
    head = [h.strip() for h in next(reader, None) or []]
    if not head:
        raise DataError(f"{path}: the file is empty but `header=True` expects a header.")
    head[0] = head[0].lstrip("\ufeff")  # spreadsheet programs start UTF-8 files with a BOM
    if names is None and _duplicates(head):
        # CsvDataset selects columns by strictly increasing index: it fails at the first batch.
        raise DataError(
            f"{path}:1: header repeats the column names {_duplicates(head)}; rename them in the "
            "file, or pass unique `column_names` (the header line is still skipped)."
        )
    if names is not None and len(head) != len(names):
        raise DataError(f"{path}:1: header has {len(head)} columns {head}, expected {names}.")
    if first[1] and head != first[1]:  # columns are read by position: no silent mix-up
        raise DataError(
            f"{path}:1: header {head} differs from {first[0]}'s {first[1]}; "
            "all files must have the same columns in the same order."
        )
    return head


def _scan_csv(files, names, header, delim, compression, max_rows, na_value):
    """(column names, a :class:`_Column` each), checking headers and row widths."""
    if names is not None and _duplicates(names):
        raise ValueError(
            "`column_names` must be unique; rename the repeated ones. "
            f"Got: {names} (repeated: {_duplicates(names)})"
        )
    if names is None and not header:
        raise ValueError("`column_names` is required when `header=False`. Got: None")
    first, columns = (files[0], None), None
    for path in files:
        reader = csv.reader(_lines(path, compression), delimiter=delim)
        if header:
            head = _header(reader, path, names, first)
            names, first = names or head, (files[0], first[1] or head)
        for index, row in enumerate(reader):
            line = reader.line_num
            if not row:  # CsvDataset reads it as a one-field record and fails mid-training
                raise DataError(f"{path}:{line}: blank line; remove it (CSV rows only).")
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
    return names, columns or [_Column() for _ in names]


_DEFAULT_TYPES = (tf2.dtypes.DType, int, np.integer, float, np.floating, str, bytes)


def _csv_defaults(names, columns, column_defaults) -> tuple[list[Any], set[int]]:
    """One default per column (inferred where not given) and the columns the caller typed."""
    # A column with no value in the rows read is float: it parses ints and floats further down.
    inferred = [[0, np.int64(0), 0.0, ""][_FLOAT if c.kind is None else c.kind] for c in columns]
    if column_defaults is None:
        return inferred, set()
    if isinstance(column_defaults, Mapping):
        unknown = sorted(set(column_defaults) - set(names))
        if unknown:
            raise DataError(
                f"`column_defaults` names columns {unknown} not in the data; columns are: {names}."
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
    for i in indices:  # checked now, not when train() builds the input_fn's graph
        default, name = defaults[i], names[i]
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
    for i in indices:
        columns[i].check(names[i], defaults[i], i in given, header=scan[0])
    return indices, [names[i] for i in indices], [defaults[i] for i in indices]


def record_default(value: Any):
    """CsvDataset's record default: a dtype makes the column required, a value optional."""
    if isinstance(value, tf2.dtypes.DType):
        return value
    if isinstance(value, np.integer):  # as wide as the NumPy type (uint32 needs int64)
        wide = value.dtype.itemsize > 4 or value.dtype == np.uint32
    elif isinstance(value, int):
        wide = not INT32_MIN <= value <= INT32_MAX
    elif isinstance(value, (float, np.floating)):
        return tf2.constant([float(value)], tf2.float32)
    else:
        return tf2.constant([value], tf2.string)
    return tf2.constant([int(value)], tf2.int64 if wide else tf2.int32)
