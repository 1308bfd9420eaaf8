"""The recipes' record of the flags a model_dir's checkpoint was trained with."""

from __future__ import annotations

import os

import pytest

from recipes import _previous_run as previous_run
from tfest_kit._tf import tf2


def _checkpoint(directory):
    tf2.train.Checkpoint(v=tf2.Variable(1.0)).save(os.path.join(directory, "ckpt"))


def _user_csv(directory):
    os.makedirs(os.path.join(directory, "data"))
    with open(os.path.join(directory, "data", "train.csv"), "w") as f:
        f.write("a,b\n1,2\n")


def test_other_flags_are_refused_only_once_a_checkpoint_exists(tmp_path):
    model_dir = str(tmp_path / "model")
    previous_run.check(model_dir, "recipe", {"seed": 0})  # nothing there yet
    assert not os.path.exists(model_dir)
    previous_run.record(model_dir, "recipe", {"seed": 0, "hidden_units": (16, 8)})
    # A run that died before its first checkpoint leaves nothing to protect.
    previous_run.check(model_dir, "recipe", {"seed": 1})
    _checkpoint(model_dir)
    previous_run.check(model_dir, "recipe", {"seed": 0, "hidden_units": [16, 8]})
    before = sorted(os.listdir(model_dir))
    with pytest.raises(previous_run.PreviousRunError) as error:
        previous_run.check(model_dir, "recipe", {"seed": 1, "hidden_units": [16, 8]})
    assert str(error.value) == (
        f"--model_dir {model_dir} holds a checkpoint trained with --seed=0 --hidden_units=16,8; "
        "this run has --seed=1 --hidden_units=16,8. Pass those flags to resume it, or give a "
        "new --model_dir"
    )
    assert sorted(os.listdir(model_dir)) == before


def test_checkpoints_in_sub_directories_and_a_file_as_model_dir(tmp_path):
    model_dir = str(tmp_path)
    previous_run.record(model_dir, "recipe", {"seed": 0})
    _checkpoint(tmp_path / "dnn")
    previous_run.check(model_dir, "recipe", {"seed": 1})  # only model_dir itself is looked at
    with pytest.raises(previous_run.PreviousRunError, match="--seed=0; this run has --seed=1"):
        previous_run.check(model_dir, "recipe", {"seed": 1}, [str(tmp_path / "dnn")])
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(previous_run.PreviousRunError, match="must be a directory"):
        previous_run.check(str(a_file), "recipe", {"seed": 0})


def test_a_refusal_ends_the_program_with_one_line(tmp_path):
    previous_run.check_and_record_or_exit(str(tmp_path), "recipe", {"seed": 0})
    _checkpoint(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        previous_run.check_and_record_or_exit(str(tmp_path), "recipe", {"seed": 2})
    assert str(exit_info.value.code).startswith("recipe: error: --model_dir ")
    assert "--seed=0; this run has --seed=2" in str(exit_info.value.code)


def test_flags_an_older_record_lacks_are_not_compared(tmp_path):
    # A record written before --eval_fraction was recorded says nothing about it: refusing
    # would leave no flags to resume that model_dir with.
    model_dir = str(tmp_path)
    previous_run.record(model_dir, "recipe", {"image_size": 32})
    _checkpoint(tmp_path)
    previous_run.check(model_dir, "recipe", {"image_size": 32, "eval_fraction": 0.2})
    with pytest.raises(previous_run.PreviousRunError, match="--image_size=32; this run has"):
        previous_run.check(model_dir, "recipe", {"image_size": 48, "eval_fraction": 0.2})
    # Once this run's record is written, the new flag is compared like the others.
    previous_run.record(model_dir, "recipe", {"image_size": 32, "eval_fraction": 0.2})
    with pytest.raises(previous_run.PreviousRunError, match="--eval_fraction=0.2; this run"):
        previous_run.check(model_dir, "recipe", {"image_size": 32, "eval_fraction": 0.5})


def test_a_model_dir_that_cannot_be_created_is_a_one_line_error(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    model_dir = str(a_file / "run")
    with pytest.raises(previous_run.PreviousRunError) as error:
        previous_run.record(model_dir, "recipe", {"seed": 0})
    assert str(error.value) == (
        f"cannot create --model_dir {model_dir}: Not a directory. Give a directory that can be "
        "created and written to"
    )
    with pytest.raises(SystemExit) as exit_info:
        previous_run.check_and_record_or_exit(model_dir, "recipe", {"seed": 0})
    assert str(exit_info.value.code) == f"recipe: error: {error.value}"


def test_a_model_dir_holding_another_recipes_run_is_refused(tmp_path, monkeypatch):
    model_dir = str(tmp_path / "other")
    previous_run.record(model_dir, "other_recipe", {"seed": 0})
    previous_run.check(model_dir, "recipe", {"seed": 0})  # no checkpoint: nothing to resume
    _checkpoint(os.path.join(model_dir, "dnn"))  # in a sub-directory, as premade_estimators'
    before = sorted(os.listdir(model_dir))
    with pytest.raises(previous_run.PreviousRunError) as error:
        previous_run.check(model_dir, "recipe", {"seed": 0}, flag_name="output_dir")
    assert str(error.value) == (
        f"--output_dir {model_dir} holds a run of recipe other_recipe (its checkpoint and "
        "other_recipe_flags.json), not of recipe; give another --output_dir"
    )
    with pytest.raises(SystemExit, match="^recipe: error: --model_dir .* other_recipe"):
        previous_run.check_and_record_or_exit(model_dir, "recipe", {"seed": 0})
    assert sorted(os.listdir(model_dir)) == before  # no recipe_flags.json written there

    # Files of no recipe's run (another program's checkpoint, the user's own data): refused,
    # as the run would write among them (a user's data/train.csv was overwritten).
    for name, make in [("foreign", _checkpoint), ("data", _user_csv)]:
        foreign = str(tmp_path / name)
        make(foreign)
        before = sorted(os.listdir(foreign))
        with pytest.raises(previous_run.PreviousRunError, match="not a run of recipe") as error:
            previous_run.check(foreign, "recipe", {"seed": 0})
        assert before[0] in str(error.value) and "new or empty --model_dir" in str(error.value)
        assert sorted(os.listdir(foreign)) == before
    os.makedirs(tmp_path / "empty" / ".hidden")
    previous_run.check(str(tmp_path / "empty"), "recipe", {"seed": 0})  # dot files aside
    # In a cluster, the other tasks write their data files before the chief's check: only a
    # checkpoint tells another program's directory there.
    monkeypatch.setenv("TF_CONFIG", '{"task": {"type": "chief", "index": 0}}')
    previous_run.check(str(tmp_path / "data"), "recipe", {"seed": 0})
    with pytest.raises(previous_run.PreviousRunError, match="not a run of recipe"):
        previous_run.check(str(tmp_path / "foreign"), "recipe", {"seed": 0})


def test_a_model_dir_with_glob_characters_is_refused_before_anything_is_written(tmp_path):
    # The iris recipe wrote its data, flags and lock there, then failed: "No files match".
    model_dir = str(tmp_path / "lr[0.1]")
    with pytest.raises(previous_run.PreviousRunError, match=r"--model_dir: `model_dir` must no"):
        previous_run.check(model_dir, "recipe", {"seed": 0})
    assert not os.path.exists(model_dir)


def test_messages_name_the_recipes_own_directory_flag(tmp_path):
    # bert_classifier's directory flag is --output_dir; two messages said --model_dir.
    model_dir = str(tmp_path / "out")
    previous_run.record(model_dir, "recipe", {"seed": 0})
    _checkpoint(model_dir)
    with pytest.raises(previous_run.PreviousRunError) as error:
        previous_run.check(model_dir, "recipe", {"seed": 1}, flag_name="output_dir")
    assert str(error.value) == (
        f"--output_dir {model_dir} holds a checkpoint trained with --seed=0; this run has "
        "--seed=1. Pass those flags to resume it, or give a new --output_dir"
    )
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(previous_run.PreviousRunError) as error:
        previous_run.check(str(a_file), "recipe", {"seed": 0}, flag_name="output_dir")
    assert str(error.value) == f"--output_dir must be a directory. Got: a file, {a_file}"
