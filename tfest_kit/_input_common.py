"""What the ``tfest_kit.inputs`` builders share: batch size, shuffling, globbing, ``DataError``."""

from __future__ import annotations

import collections
import os
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

from tfest_kit._checks import check_int
from tfest_kit._errors import TfestKitError
from tfest_kit._tf import tf2

AUTOTUNE = tf2.data.AUTOTUNE
InputFn = Callable[..., Any]
FilePattern = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]

_DEFAULT_SHUFFLE_BUFFER = 10_000
_LISTED_ENTRIES = 20


class DataError(TfestKitError, ValueError):
    """The data does not match what the builder was told: missing files, columns or keys, bad rows.

    A ``ValueError`` too, so ``except ValueError`` keeps working for callers that do not know it.
    """


# --------------------------------------------------------------------------- shared helpers


def _check_common(batch_size: int, num_epochs: Optional[int], shuffle_buffer: Optional[int]):
    check_int("batch_size", batch_size)
    check_int("num_epochs", num_epochs, allow_none=True, hint="None repeats forever")
    check_int("shuffle_buffer", shuffle_buffer, allow_none=True)


def _batch_size(params: Optional[Mapping[str, Any]], default: int) -> int:
    """``params["batch_size"]`` when the Estimator passes one, else ``default``.

    Raises:
      ValueError: if ``params["batch_size"]`` is not a positive int (``Estimator(params=...)``
        hands it over unchecked, and ``batch(0)`` or ``batch(8.9)`` would fail or truncate).
    """
    if params and params.get("batch_size") is not None:
        return check_int(
            "params['batch_size']",
            params["batch_size"],
            hint="the Estimator's params override the builder's batch_size",
        )
    return default


def _shuffle_repeat(ds, shuffle: bool, buffer: int, num_epochs: Optional[int], seed):
    # Shuffle before repeat so that every epoch sees every example exactly once.
    if shuffle:
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    return ds.repeat(num_epochs)


# Files read at once while shuffling: enough for the shuffle buffer to mix several shards.
_FILES_AT_ONCE = 8


def _read_files(
    files: list[str],
    read: Callable[[Any], Any],
    shuffle: bool,
    seed: Optional[int],
    files_at_once: Optional[int] = None,
) -> Any:
    """A Dataset of the records of ``files``, each read by ``read(path)`` into a Dataset.

    Shuffling: files in a shuffled order, up to ``files_at_once`` (default 8) read at once and
    interleaved, so that the shuffle buffer mixes several shards (files of one class each
    gave batches of one class), in an order a seed fixes. Not shuffling: one file after
    another in the order given, so that predictions line up with the files' rows, unless
    ``files_at_once`` says otherwise.
    """
    paths = tf2.data.Dataset.from_tensor_slices(files)
    if shuffle:
        paths = paths.shuffle(len(files), seed=seed)
    if files_at_once is None:
        files_at_once = _FILES_AT_ONCE if shuffle else 1
    cycle = max(1, min(files_at_once, len(files)))
    if cycle == 1:
        return paths.interleave(read, cycle_length=1)
    # Deterministic (tf.data's default, which tf.data.Options can change): the order is then
    # the shuffles', which a seed fixes, an op seed or RunConfig(tf_random_seed=…)'s.
    return paths.interleave(read, cycle_length=cycle, num_parallel_calls=AUTOTUNE)


def _describe_dir(directory: str) -> str:
    if not directory:
        directory = "."
    if not tf2.io.gfile.isdir(directory):
        return f"directory {directory!r} does not exist"
    entries = sorted(tf2.io.gfile.listdir(directory))
    if not entries:
        return f"directory {directory!r} is empty"
    shown = ", ".join(entries[:_LISTED_ENTRIES])
    more = f" … and {len(entries) - _LISTED_ENTRIES} more" if len(entries) > _LISTED_ENTRIES else ""
    return f"directory {directory!r} contains: {shown}{more}"


def _glob(file_pattern: FilePattern, argument: str = "file_pattern") -> list[str]:
    """Expands one pattern or a list of them.

    Raises:
      DataError: for a pattern that matches nothing or matches a directory.
    """
    if isinstance(file_pattern, (str, os.PathLike)):
        patterns = [os.fspath(file_pattern)]
    elif isinstance(file_pattern, Sequence) and file_pattern:
        patterns = [os.fspath(p) for p in file_pattern]
    else:
        raise TypeError(
            f"`{argument}` must be a path / glob pattern or a non-empty list of them. "
            f"Got: {file_pattern!r}"
        )
    files: list[str] = []
    seen: set[str] = set()  # a list's `in` made 20,000 shards take seconds
    for pattern in patterns:
        matched = sorted(tf2.io.gfile.glob(pattern))
        if not matched:
            raise DataError(
                f"`{argument}` {pattern!r} matches no file; "
                f"{_describe_dir(os.path.dirname(pattern))}."
            )
        for match in matched:
            if tf2.io.gfile.isdir(match):
                raise _directory_error(argument, pattern, match, matched)
        for match in matched:
            if match not in seen:
                seen.add(match)
                files.append(match)
    return files


def _common_extension(paths: list[str]) -> str:
    """``"*.csv"`` for the files' most common extension, ``"*"`` when they have none."""
    extensions = collections.Counter(
        os.path.splitext(path)[1] for path in paths if not tf2.io.gfile.isdir(path)
    )
    common = [ext for ext, _ in extensions.most_common() if ext]
    return "*" + (common[0] if common else "")


def _directory_error(argument: str, pattern: str, directory: str, matched: list[str]) -> DataError:
    """The error for a pattern that names a directory, which the readers would call empty."""
    files = [os.path.join(directory, name) for name in tf2.io.gfile.listdir(directory)]
    if os.path.normpath(pattern) == os.path.normpath(directory):
        what = "is a directory"
        example = os.path.join(directory, _common_extension(files))
    else:
        what = f"matches the directory {directory!r}"
        others = [m for m in matched if not tf2.io.gfile.isdir(m)]
        example = (
            os.path.join(os.path.dirname(pattern), _common_extension(others))
            if others
            else os.path.join(directory, _common_extension(files))
        )
    return DataError(
        f"`{argument}` {pattern!r} {what}, not files: pass a pattern that matches files only, "
        f"such as {example!r}; {_describe_dir(directory)}."
    )
