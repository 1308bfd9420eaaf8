"""The flag definitions and checks the recipes share (each recipe's use: test_guide_recipes.py,
test_mobilenet_cats_dogs.py, test_bert_classifier.py)."""

from __future__ import annotations

import ast

import pytest
from absl import flags

from recipes import _flags
from tests.conftest import ROOT, run_recipe_cases


@pytest.fixture
def flag_values():
    return flags.FlagValues()


def test_path_flags_expand_a_leading_tilde(flag_values, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    _flags.define_path("model_dir", None, "Checkpoints.", flag_values=flag_values)
    _flags.define_path("init_checkpoint", None, "Warm start.", flag_values=flag_values)
    # Bash leaves "~" after "--flag=" as it is: the program gets the two characters.
    flag_values(["prog", "--model_dir=~/run", "--init_checkpoint=gs://bucket/~x/model.ckpt"])
    assert flag_values.model_dir == str(tmp_path / "run")
    assert flag_values.init_checkpoint == "gs://bucket/~x/model.ckpt"  # not at the start


def test_path_flags_keep_an_unset_default(flag_values):
    _flags.define_path("output_dir", None, "Outputs.", flag_values=flag_values)
    flag_values(["prog"])
    assert flag_values.output_dir is None and not flag_values["output_dir"].present


@pytest.mark.parametrize("value", ["0", "0,16", "16,-1", "a", "1.5", "16,,16", ""])
def test_layer_sizes_must_be_integers_of_at_least_one(flag_values, value):
    flags.DEFINE_list("hidden_units", ["16"], "Layers.", flag_values=flag_values)
    _flags.register_layer_sizes("hidden_units", flag_values=flag_values)
    with pytest.raises(flags.IllegalFlagValueError, match="layer sizes >= 1, such as 32,16"):
        flag_values(["prog", f"--hidden_units={value}"])


def test_layer_sizes_accept_a_list_of_positive_integers(flag_values):
    flags.DEFINE_list("hidden_units", ["16"], "Layers.", flag_values=flag_values)
    _flags.register_layer_sizes("hidden_units", flag_values=flag_values)
    flag_values(["prog", "--hidden_units=32, 8,1"])
    assert [int(u) for u in flag_values.hidden_units] == [32, 8, 1]


@pytest.mark.parametrize("value", ["0", "-1", "-0.001"])
def test_positive_rejects_zero_and_negative_values(flag_values, value):
    flags.DEFINE_float("learning_rate", 0.01, "Rate.", flag_values=flag_values)
    _flags.register_positive("learning_rate", flag_values=flag_values)
    with pytest.raises(flags.IllegalFlagValueError, match="--learning_rate must be > 0"):
        flag_values(["prog", f"--learning_rate={value}"])
    flag_values(["prog", "--learning_rate=1e-5"])
    assert flag_values.learning_rate == 1e-5


@pytest.mark.parametrize(
    "recipe",
    sorted(p.stem for p in (ROOT / "recipes").glob("*.py") if not p.stem.startswith("_")),
)
def test_help_text_keeps_its_cluster_command_and_percent_signs(recipe):
    # absl prints the module docstring for --help after `doc %= (argv[0],) * count('%')`, and a
    # backslash at a line's end in a docstring joins the lines of the shell example.
    doc = ast.get_docstring(ast.parse((ROOT / "recipes" / f"{recipe}.py").read_text()))
    assert "%" not in doc.replace("%%", ""), f"{recipe}: a % in --help is filled with argv[0]"
    command = [line for line in doc.splitlines() if "python -m tfest_kit.cluster" in line]
    assert command and all(line.rstrip().endswith("-- \\") for line in command), command


def test_help_exits_0_and_a_bad_flag_still_exits_1():
    # absl's --help prints the help and exits 1; every recipe runs through _flags.run.
    recipes = sorted((ROOT / "recipes").glob("[!_]*.py"))
    assert all("_flags.run(main)" in path.read_text() for path in recipes)
    # An unquoted path with a space trained into its first word; --model_dir= into a temp dir.
    cases = [["--help"], ["--no_such_flag"], ["--model_dir=/tmp/a", "b"], ["--model_dir="]]
    shown, bad, stray, empty = run_recipe_cases("iris_custom_estimator", cases)
    assert shown.returncode == 0 and "--model_dir" in shown.stdout, shown.stdout + shown.stderr
    assert bad.returncode == 1, bad
    assert stray.returncode == 1 and "unexpected argument 'b': quote a path" in stray.stderr, stray
    assert empty.returncode == 1 and "flag --model_dir=: is empty" in empty.stderr, empty
