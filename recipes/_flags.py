"""Flag definitions and checks the recipes share: paths with ``~``, layer sizes, learning rates.

Each check runs while absl parses the command line, so a bad value stops a recipe with
``flag --NAME=VALUE: <what is wrong>`` before it imports data or writes a file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Callable, Optional

from absl import app, flags

import recipes

__all__ = [
    "define_path",
    "define_tensorflow_info",
    "register_layer_sizes",
    "register_positive",
    "run",
]

_HELP_FLAGS = {"-?", "--help", "--helpshort", "--helpfull", "--helpxml"}

# The flags the functions below define belong to the recipe that calls them, not to this
# module: --helpshort and the help printed with a usage error list only the main module's.
flags.disclaim_key_flags()


class _PathParser(flags.ArgumentParser):
    """A string flag whose value has a leading ``~`` expanded."""

    def parse(self, argument: str) -> str:
        # Bash expands ~ only at the start of a word: "--model_dir=~/run" arrives as it is,
        # and TensorFlow would create ./~/run. URLs (gs://...) have no ~ and stay as they are.
        if not argument:  # an unset shell variable: each run would start over in a temp dir
            raise ValueError("is empty: leave the flag out for the default")
        return os.path.expanduser(argument)

    def flag_type(self) -> str:
        return "string"


def define_path(
    name: str,
    default: Optional[str],
    help_text: str,
    flag_values: flags.FlagValues = flags.FLAGS,
) -> None:
    """Defines a string flag for a file or directory; ``~`` and ``~user`` are expanded.

    Args:
      name: the flag's name.
      default: its default (None: unset).
      help_text: its help line.
      flag_values: where to define it (absl's global ``FLAGS`` by default).

    Example:
      >>> define_path("model_dir", None, "Checkpoints and exports (a temp dir if unset).")
    """
    flags.DEFINE(
        _PathParser(),
        name,
        default,
        help_text,
        flag_values=flag_values,
        serializer=flags.ArgumentSerializer(),
    )


def define_tensorflow_info(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines ``--tensorflow_info`` (off): also print TensorFlow's own INFO lines.

    The recipes print their progress (tfest_kit's ``ProgressHook`` or the TPU fallback's loss
    line) and results; TensorFlow's INFO lines would add the ``RunConfig`` (seven lines per
    Estimator), "Calling model_fn." and three lines per checkpoint. Pass the flag's value to
    ``tfest_kit.logs.setup(tensorflow_info=...)``.

    Args:
      flag_values: where to define it (absl's global ``FLAGS`` by default).

    Example:
      >>> define_tensorflow_info()
    """
    flags.DEFINE_bool(
        "tensorflow_info",
        False,
        "Also print TensorFlow's own INFO lines (model_fn calls, the RunConfig, checkpoint saves).",
        flag_values=flag_values,
    )


def _layer_sizes(values: Sequence[str]) -> bool:
    try:
        return bool(values) and all(int(value) >= 1 for value in values)
    except ValueError:  # "a", "1.5", or "" between two commas
        return False


def register_layer_sizes(name: str, flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Requires the list flag ``name`` to hold one or more integers >= 1.

    A layer of 0 units aborts the process inside oneDNN, and "a" or an empty list ended in
    a traceback.

    Example:
      >>> register_layer_sizes("hidden_units")
    """
    flags.register_validator(
        name,
        _layer_sizes,
        f"--{name} must be a comma-separated list of layer sizes >= 1, such as 32,16",
        flag_values=flag_values,
    )


def register_positive(name: str, flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Requires the number flag ``name`` to be > 0 (a learning rate, for example).

    Example:
      >>> register_positive("learning_rate")
    """
    # A rate of 0 trains nothing and a negative one climbs the loss, both without a word.
    flags.register_validator(
        name, lambda value: value > 0, f"--{name} must be > 0", flag_values=flag_values
    )


def run(main: Callable) -> None:
    """``absl.app.run(main)``, with ``--help`` exiting 0: absl prints the help and exits 1.

    Example:

        if __name__ == "__main__":
            _flags.run(main)
    """
    if recipes.ctrl_c_pressed and recipes.running_recipe():
        raise KeyboardInterrupt  # pressed while imports ran, and swallowed by one of them

    def checked(argv: list[str]):  # absl hands main what is not a flag, where it was ignored
        if argv[1:]:
            raise app.UsageError(f"unexpected argument {argv[1]!r}: quote a path with spaces")
        return main(argv)

    try:
        app.run(checked)
    except SystemExit as e:
        if e.code == 1 and _HELP_FLAGS.intersection(sys.argv[1:]):
            sys.exit(0)  # the help was asked for and printed, before main ran
        raise
