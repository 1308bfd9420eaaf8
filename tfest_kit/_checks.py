"""Argument checks shared by tfest_kit's modules: counts, sizes, steps and non-negative numbers.

One place for the test every entry point repeats ("an int, not a bool, at least N") and for
the wording of its error, so that ``batch_size=0`` reads the same in every module. No
TensorFlow and no NumPy here: NumPy's scalars are recognised through :mod:`numbers`.
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
    """Returns ``value`` if it is a bool; TypeError otherwise (``"no"`` would be truthy).

    Example:

        fail = check_bool("fail", fail)      # TypeError: `fail` must be True or False. Got: 'no'
    """
    if not isinstance(value, bool):
        alternatives = f"True, False {more}" if more else "True or False"
        raise TypeError(f"`{name}` must be {alternatives}. Got: {value!r}")
    return value


def did_you_mean(name: Any, choices: Sequence[str]) -> str:
    """``" Did you mean 'x'?"`` for the choice nearest to a misspelt ``name``, else ``""``.

    Example:

        raise ValueError(f"unknown key {key!r}.{did_you_mean(key, KEYS)}")
    """
    close = difflib.get_close_matches(str(name), choices, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def is_int_at_least(value: Any, minimum: int) -> bool:
    """Tells whether ``value`` is a Python or NumPy int (not a bool) that is ``>= minimum``.

    For callers whose error message carries more context than :func:`check_int` writes
    (a ``TF_CONFIG`` excerpt, the other forms an argument may take).

    Args:
      value: anything.
      minimum: the smallest accepted value.

    Returns:
      True for ``3`` or ``np.int64(3)`` with ``minimum=1``; False for ``True``, ``3.0``, ``"3"``
      and ``0``.

    Example:

        if not is_int_at_least(index, 0):
            raise ValueError(f"TF_CONFIG task.index must be a non-negative integer. Got: {task}")
    """
    # bool is an Integral too; True would pass as 1.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return False
    return value >= minimum


def _expectation(minimum: int) -> str:
    if minimum == 1:
        return "a positive int"
    return f"an int >= {minimum}"


def check_int(
    name: str, value: Any, minimum: int = 1, *, allow_none: bool = False, hint: str = ""
) -> Optional[int]:
    """Returns ``value`` as a Python int, or raises ValueError naming ``name``.

    Python and NumPy ints are accepted; bools, floats (even ``3.0``) and strings are not.

    Args:
      name: the argument's name, shown in backticks in the message.
      value: what the caller passed.
      minimum: the smallest accepted value (1: "a positive int", otherwise "an int >= N").
      allow_none: accept ``None`` (returned as is); the message then says "or None".
      hint: a few words of context added in parentheses after the expectation, e.g.
        ``"None repeats forever"``.

    Returns:
      ``int(value)``, or None when ``value`` is None and ``allow_none`` is set.

    Raises:
      ValueError: ``"`name` must be a positive int[ or None][ (hint)]. Got: value"`` (or
        ``"an int >= N"`` for another ``minimum``).

    Example:

        batch_size = check_int("batch_size", batch_size)
        eval_steps = check_int("eval_steps", eval_steps, allow_none=True)
        min_steps = check_int("min_steps", min_steps, 0)
    """
    if value is None and allow_none:
        return None
    if not is_int_at_least(value, minimum):
        more = " or None" if allow_none else ""
        note = f" ({hint})" if hint else ""
        raise ValueError(f"`{name}` must be {_expectation(minimum)}{more}{note}. Got: {value!r}")
    return int(value)


def check_number(
    name: str, value: Any, minimum: float = 0.0, *, hint: str = ""
) -> Union[int, float]:
    """Returns ``value`` as a Python int or float ``>= minimum``, or raises ValueError.

    Python and NumPy ints and floats are accepted; bools, strings and NaN are not.

    Args:
      name: the argument's name, shown in backticks in the message.
      value: what the caller passed.
      minimum: the smallest accepted value.
      hint: a few words of context added in parentheses, e.g. the unit (``"seconds"``).

    Returns:
      ``value`` as a Python ``int`` if it is an int, else as a ``float``.

    Raises:
      ValueError: ``"`name` must be a number >= minimum[ (hint)]. Got: value"``.

    Example:

        throttle_secs = check_number("throttle_secs", throttle_secs, hint="seconds")
    """
    # `not value >= minimum` (rather than `value < minimum`) also rejects NaN.
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= minimum:
        note = f" ({hint})" if hint else ""
        raise ValueError(f"`{name}` must be a number >= {minimum:g}{note}. Got: {value!r}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def positive_int_arg(text: str) -> int:
    """An ``argparse`` ``type=`` for counts: the int in ``text`` if it is >= 1.

    Args:
      text: the command-line value.

    Returns:
      The value as an int.

    Raises:
      argparse.ArgumentTypeError: if ``text`` is not an integer >= 1 (argparse prints it after
        the option's name and exits with status 2).

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
