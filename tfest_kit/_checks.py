"""Argument checks every tfest_kit module shares: one test and one wording for ``batch_size=0``.

No TensorFlow and no NumPy here: NumPy's scalars are recognised through :mod:`numbers`.
"""

from __future__ import annotations

import argparse
import difflib
import numbers
from collections.abc import Sequence
from typing import Any, Optional, Union

__all__ = [
    "check_bool",
    "check_int",
    "check_number",
    "did_you_mean",
    "is_int_at_least",
    "positive_int_arg",
]


def check_bool(name: str, value: Any, more: str = "") -> bool:
    """``value`` if it is a bool; TypeError otherwise (``"no"`` would be truthy)."""
    if not isinstance(value, bool):
        alternatives = f"True, False {more}" if more else "True or False"
        raise TypeError(f"`{name}` must be {alternatives}. Got: {value!r}")
    return value


def did_you_mean(name: Any, choices: Sequence[str]) -> str:
    """``" Did you mean 'x'?"`` for the choice nearest to a misspelt ``name``, else ``""``."""
    close = difflib.get_close_matches(str(name), choices, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def is_int_at_least(value: Any, minimum: int) -> bool:
    """Whether ``value`` is a Python or NumPy int (not a bool: True would pass as 1) >= minimum.

    For callers whose message says more than :func:`check_int` writes (a ``TF_CONFIG`` excerpt).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return False
    return value >= minimum


def check_int(
    name: str, value: Any, minimum: int = 1, *, allow_none: bool = False, hint: str = ""
) -> Optional[int]:
    """``int(value)`` for a Python or NumPy int >= ``minimum``, else ValueError naming ``name``.

    Bools, floats (even ``3.0``) and strings are refused; ``None`` only with ``allow_none``.
    ``hint`` adds a few words in parentheses (``"None repeats forever"``).

    Example:

        batch_size = check_int("batch_size", batch_size)  # `batch_size` must be a positive int
        min_steps = check_int("min_steps", min_steps, 0)  # `min_steps` must be an int >= 0
    """
    if value is None and allow_none:
        return None
    if not is_int_at_least(value, minimum):
        expected = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        more = " or None" if allow_none else ""
        note = f" ({hint})" if hint else ""
        raise ValueError(f"`{name}` must be {expected}{more}{note}. Got: {value!r}")
    return int(value)


def check_number(
    name: str, value: Any, minimum: float = 0.0, *, hint: str = ""
) -> Union[int, float]:
    """``value`` as a Python int or float >= ``minimum``; ValueError for bools, strings, NaN.

    Example:

        throttle_secs = check_number("throttle_secs", throttle_secs, hint="seconds")
    """
    # `not value >= minimum` (rather than `value < minimum`) also rejects NaN.
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= minimum:
        note = f" ({hint})" if hint else ""
        raise ValueError(f"`{name}` must be a number >= {minimum:g}{note}. Got: {value!r}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def positive_int_arg(text: str) -> int:
    """An ``argparse`` ``type=`` for counts: argparse prints the error and exits with status 2.

    Example:

        parser.add_argument("--batch_size", type=positive_int_arg, default=1024)
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer. Got: {text!r}")
    return value
