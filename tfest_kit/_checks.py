"""Argument checks every tfest_kit module shares (one test and one wording per kind of argument),
and ``TfestKitError``, the one exception base of tfest_kit.

No TensorFlow and no NumPy here: NumPy's scalars are recognised through :mod:`numbers`.
"""

import argparse
import numbers
from typing import Any, Optional, Union

# Said after a shape with one dimension more than the model's.
BATCHED_TWICE = " (batched twice? .batch() again, or a receiver shape with the batch dimension)"


class TfestKitError(Exception):
    """A problem of the environment or of files (wrong arguments raise ValueError / TypeError)."""


def is_int_at_least(value: Any, minimum: int) -> bool:
    """Whether ``value`` is a Python or NumPy int (not a bool) >= ``minimum``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= minimum


def check_int(
    name: str, value: Any, minimum: int = 1, *, allow_none: bool = False, hint: str = ""
) -> Optional[int]:
    """``int(value)`` for an int >= ``minimum`` (``None`` with ``allow_none``), else ValueError."""
    if value is None and allow_none:
        return None
    if not is_int_at_least(value, minimum):
        expected = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        expected += (" or None" if allow_none else "") + (f" ({hint})" if hint else "")
        raise ValueError(f"`{name}` must be {expected}. Got: {value!r}")
    return int(value)


def check_number(
    name: str, value: Any, minimum: float = 0.0, *, hint: str = ""
) -> Union[int, float]:
    """``value`` as a Python int or float >= ``minimum``; ValueError for bools, strings, NaN."""
    # `not value >= minimum` (rather than `value < minimum`) also rejects NaN.
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= minimum:
        note = f" ({hint})" if hint else ""
        raise ValueError(f"`{name}` must be a number >= {minimum:g}{note}. Got: {value!r}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def positive_int_arg(text: str) -> int:
    """An ``argparse`` ``type=`` for counts: a bad one exits with argparse's usage error."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer. Got: {text!r}")
    return value
