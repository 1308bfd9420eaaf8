"""The shared argument checks: what they accept, what they return, how their errors read."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

from tfest_kit._checks import check_int, check_number, is_int_at_least, positive_int_arg


@pytest.mark.parametrize("value", [1, 7, np.int64(3), np.int32(1), np.uint8(200)])
def test_check_int_accepts_python_and_numpy_ints(value):
    got = check_int("batch_size", value)
    assert got == value
    assert type(got) is int


@pytest.mark.parametrize("value", [True, False, 3.0, 2.5, np.float32(2.0), "3", [3], None])
def test_check_int_rejects_bools_floats_strings_and_none(value):
    with pytest.raises(ValueError, match=r"`n`.*positive int") as info:
        check_int("n", value)
    assert f"Got: {value!r}" in str(info.value)


@pytest.mark.parametrize(
    "minimum, bad, expectation",
    [
        (0, -1, "an int >= 0"),
        (1, 0, "a positive int"),
        (2, 1, "an int >= 2"),
    ],
)
def test_check_int_message_names_the_minimum(minimum, bad, expectation):
    assert check_int("k", minimum, minimum) == minimum
    with pytest.raises(ValueError) as info:
        check_int("k", bad, minimum)
    assert expectation in str(info.value) and f"Got: {bad!r}" in str(info.value)


def test_check_int_none_only_with_allow_none():
    assert check_int("eval_steps", None, allow_none=True) is None
    assert check_int("eval_steps", np.int16(5), allow_none=True) == 5
    with pytest.raises(ValueError, match=r"`eval_steps`.*positive int or None.*Got: 0"):
        check_int("eval_steps", 0, allow_none=True)
    with pytest.raises(ValueError, match=r"`seed`.*>= 0 or None.*Got: -1"):
        check_int("seed", -1, 0, allow_none=True)


def test_check_int_hint_is_added_in_parentheses():
    with pytest.raises(ValueError, match=r"`num_epochs`.*\(None repeats forever\)"):
        check_int("num_epochs", 0, allow_none=True, hint="None repeats forever")


def test_is_int_at_least():
    assert is_int_at_least(0, 0)
    assert is_int_at_least(np.int64(2), 2)
    assert not is_int_at_least(True, 0)
    assert not is_int_at_least(1.0, 0)
    assert not is_int_at_least("1", 0)
    assert not is_int_at_least(-1, 0)


@pytest.mark.parametrize("value", [0, 0.0, 5, 2.5, np.float32(0.5), np.int64(3)])
def test_check_number_accepts_non_negative_numbers(value):
    got = check_number("min_delta", value)
    assert got == value
    assert type(got) in (int, float)


def test_check_number_keeps_ints_ints():
    assert type(check_number("throttle_secs", np.int64(60))) is int
    assert type(check_number("throttle_secs", np.float64(1.5))) is float


@pytest.mark.parametrize("value", [-0.1, -1, True, "1", None, math.nan])
def test_check_number_rejects(value):
    with pytest.raises(ValueError, match=r"`min_delta`.*number >= 0") as info:
        check_number("min_delta", value)
    assert f"Got: {value!r}" in str(info.value)


def test_check_number_minimum_and_hint():
    assert check_number("lr", 0.5, 0.1) == 0.5
    with pytest.raises(ValueError, match=r"`throttle_secs`.*\(seconds\).*-5"):
        check_number("throttle_secs", -5, hint="seconds")
    with pytest.raises(ValueError, match=r"`lr` must be a number >= 0\.1\. Got: 0\.05"):
        check_number("lr", 0.05, 0.1)


def test_positive_int_arg_on_a_command_line(capsys):
    parser = argparse.ArgumentParser(prog="prog")
    parser.add_argument("--batch_size", type=positive_int_arg, default=1)
    assert parser.parse_args(["--batch_size", "64"]).batch_size == 64
    for text in ("0", "-3", "1.5", "many"):
        with pytest.raises(SystemExit) as info:
            parser.parse_args(["--batch_size", text])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "--batch_size" in err and "positive integer" in err and repr(text) in err
