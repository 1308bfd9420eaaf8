"""`python -m recipes.mobilenet_cats_dogs` end to end, at test size, as a subprocess.

Ctrl-C during training and a rerun with nothing to train go through the same
``recipes._interrupt.Run`` as every recipe: tested in test_interrupt.py and, as programs, in
test_guide_recipes.py (tpu_digits) and test_bert_classifier.py.
"""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from PIL import Image

from tests.conftest import run_program, run_recipe_cases
from tfest_kit import serving

RECIPE = ["-m", "recipes.mobilenet_cats_dogs"]
# Tiny network, tiny images, few steps: exercises the whole flow in well under a minute.
TEST_SIZE = [
    "--image_size=32",
    "--alpha=0.35",
    "--steps=6",
    "--batch_size=8",
    "--log_every=3",
    "--num_predict=2",
    "--weights=none",
]


def _offline_env(tmp_path):
    # A fresh HOME (no Keras / tfds caches) and a dead proxy, so nothing can reach the network.
    return {
        "HOME": str(tmp_path / "home"),
        "https_proxy": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
    }


def _assert_one_line_error(proc, *fragments):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(lines) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _jpeg(colour, size=40) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buffer, "JPEG")
    return buffer.getvalue()


@pytest.mark.slow
def test_auto_without_tfds_runs_the_sample_trains_exports_and_predicts(tmp_path):
    model_dir = tmp_path / "model"
    proc = run_program(
        [*RECIPE, f"--data_dir={tmp_path / 'no_tfds'}", "--sample_per_class=16"]
        + [f"--cache_dir={tmp_path / 'cache'}"]
        + [f"--model_dir={model_dir}", *TEST_SIZE],
        env=_offline_env(tmp_path),
    )
    out = proc.stdout
    assert "data: built-in sample (--data=auto: tfds cats_vs_dogs is not prepared in" in out
    assert "skipped 3 corrupted images" in out
    assert "eval: accuracy=" in out and "global_step=6" in out
    assert "step 6/6 (100%)" in proc.stderr  # progress with loss and ETA
    # The recipe reports its own events; TensorFlow's INFO lines would repeat them.
    assert "Calling model_fn" not in proc.stderr and "Using config" not in proc.stderr
    assert len([line for line in out.splitlines() if line.startswith("predict ")]) == 2
    assert os.path.isfile(tmp_path / "cache" / "cats_dogs_sample_v1_16_128" / "COMPLETE")

    # The export answers encoded image bytes (JPEG and PNG) through Predictor.
    png = io.BytesIO()
    Image.new("RGB", (50, 30), (10, 200, 30)).save(png, "PNG")
    predictor = serving.Predictor(serving.latest_export(str(model_dir / "export")))
    outputs = predictor({"image_bytes": [_jpeg((200, 120, 40)), png.getvalue()]})
    (logits,) = outputs.values()
    assert np.asarray(logits).shape == (2, 1)
    assert np.all(np.isfinite(logits))

    # Resuming that model_dir with another image size is refused before anything is written
    # (the flags that change the held-out images: test_rerun_that_changes_the_held_out_…).
    before = sorted(os.listdir(model_dir))
    proc = run_program(
        [*RECIPE, "--data=sample", f"--cache_dir={tmp_path / 'cache'}", "--sample_per_class=16"]
        + [f"--model_dir={model_dir}", *TEST_SIZE, "--image_size=48"],
        env=_offline_env(tmp_path),
        check_exit=None,
    )
    _assert_one_line_error(proc, "--image_size=32 --alpha=0.35", "--image_size=48", "--model_dir")
    assert sorted(os.listdir(model_dir)) == before


def test_images_folder_skips_corrupted_files(tmp_path, capsys):
    # The --data=images route to the reader the whole-program test drives (its sample is such a
    # folder, corrupted files included); in this process, without a minute of MobileNet graphs.
    from recipes import mobilenet_cats_dogs as recipe

    image_dir = tmp_path / "pets"
    for folder, colour in (("cats", (230, 140, 50)), ("dogs", (90, 60, 30))):
        (image_dir / folder).mkdir(parents=True)
        for i in range(10):
            shade = tuple(min(255, c + 8 * i) for c in colour)
            (image_dir / folder / f"{i}.jpg").write_bytes(_jpeg(shade))
    (image_dir / "cats" / "broken.jpg").write_bytes(_jpeg((1, 2, 3))[:100])
    (image_dir / "dogs" / "really_a_text_file.jpg").write_bytes(b"not an image")
    (image_dir / "dogs" / "README.txt").write_text("not counted: not an image name")
    recipe.FLAGS([RECIPE[1], "--data=images", f"--image_dir={image_dir}", "--num_predict=2"])
    try:
        data = recipe._choose_data(recipe._data_source(), image_size=32)
    finally:
        recipe.FLAGS.unparse_flags()
    out = capsys.readouterr().out.splitlines()
    skipped = "skipped 2 corrupted images: cats/broken.jpg, dogs/really_a_text_file.jpg"
    assert skipped in out and f"images: 16 for training, 4 held out ({image_dir})" in out, out
    assert [(name.split("/")[0], label) for name, label, _ in data["examples"]] == [
        ("cats", 0),
        ("dogs", 1),
    ]
    assert callable(data["train"]) and callable(data["eval"])


def test_skipped_line_names_five_files_and_says_nothing_for_a_clean_folder(tmp_path):
    from recipes import mobilenet_cats_dogs

    assert mobilenet_cats_dogs._skipped_line([], str(tmp_path)) == ""  # not "skipped 0 …"
    paths = [str(tmp_path / "cats" / f"{i}.jpg") for i in range(7)]
    line = mobilenet_cats_dogs._skipped_line(paths, str(tmp_path))
    assert line.startswith("skipped 7 corrupted images: cats/0.jpg, cats/1.jpg")
    assert "cats/4.jpg and 2 more" in line and "cats/5.jpg" not in line


def test_tfds_offline_is_one_line_error(tmp_path):
    # The real tfds path: the download fails offline (a dead local proxy stands in for the
    # network, and GCS look-ups are off), and the recipe says so in one line.
    proc = run_program(
        [*RECIPE, "--data=tfds", f"--data_dir={tmp_path / 'tfds'}", "--weights=none"],
        env={**_offline_env(tmp_path), "NO_GCE_CHECK": "true"},
        check_exit=None,
        timeout=240,
    )
    _assert_one_line_error(proc, "could not prepare tfds cats_vs_dogs", "internet", "--data=sample")


def _save(path, mode="RGB", fmt="JPEG", size=(40, 30)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size).save(path, fmt)
    return str(path)


def test_image_folder_any_case_png_gif_bmp_and_symlinks(tmp_path):
    from recipes import _pets_data

    outside = tmp_path / "elsewhere"
    real_dog = _save(outside / "dogs" / "rex.jpg")
    root = tmp_path / "pets" / "petimages"  # folder names in any case
    good_cats = [
        _save(root / "CATS" / "a.jpg"),
        _save(root / "CATS" / "b.PNG", "RGBA", "PNG"),
        _save(root / "CATS" / "c.gif", "P", "GIF"),
        _save(root / "CATS" / "d.bmp", "RGB", "BMP"),
    ]
    bad_cats = [
        _save(root / "CATS" / "one_bit.bmp", "1", "BMP"),  # TensorFlow cannot decode it
        _save(root / "CATS" / "png_named.jpg", "RGB", "PNG"),  # not what its name says
    ]
    (root / "CATS" / "notes.txt").write_text("not an image name: not counted")
    (root / "CATS" / "linked.jpg").symlink_to(real_dog)
    (root / "CATS" / "dangling.jpg").symlink_to(tmp_path / "missing.jpg")
    (root / "Dog").symlink_to(outside / "dogs", target_is_directory=True)

    found = _pets_data.scan_folder(str(tmp_path / "pets"))
    cats = [p for p, y in zip(found.paths, found.labels) if y == 0]
    dogs = [p for p, y in zip(found.paths, found.labels) if y == 1]
    assert sorted(cats) == sorted([*good_cats, str(root / "CATS" / "linked.jpg")])
    assert dogs == [str(root / "Dog" / "rex.jpg")]
    assert sorted(found.skipped) == sorted([*bad_cats, str(root / "CATS" / "dangling.jpg")])

    # Everything accepted decodes in the training input pipeline.
    input_fn = _pets_data.folder_input_fn(
        found.paths, found.labels, image_size=16, batch_size=8, training=False
    )
    images, labels = next(iter(input_fn()))
    assert images.shape == (6, 16, 16, 3) and labels.shape == (6, 1)


def test_image_folder_with_two_folders_for_a_class_is_an_error(tmp_path):
    from recipes import _pets_data

    for folder in ("cat", "Cats", "dogs"):
        _save(tmp_path / folder / "x.jpg")
    with pytest.raises(ValueError, match=r"more than one folder for a class.*'Cats'.*'cat'"):
        _pets_data.class_dirs(str(tmp_path))


def test_small_folder_holds_out_one_image_per_class():
    from recipes import _pets_data

    paths = ["c0", "c1", "c2", "d0", "d1"]
    labels = [0, 0, 0, 1, 1]
    train, held_out = _pets_data.split(paths, labels, eval_fraction=0.2)
    assert held_out == (["c2", "d1"], [0, 1])
    assert train == (["c0", "c1", "d0"], [0, 0, 1])
    # Larger classes keep the every-k-th split.
    paths = [f"c{i}" for i in range(10)] + ["d0"]
    _, held_out = _pets_data.split(paths, [0] * 10 + [1], eval_fraction=0.2)
    assert held_out == (["c4", "c9"], [0, 0])


def test_held_out_images_alternate_classes_so_the_first_batches_score_both():
    # The held-out list used to hold every cat before every dog, and evaluation reads it in
    # order: --eval_steps=2 scored only cats (accuracy 1.0 for a model answering "cat").
    from recipes import _pets_data

    paths = [f"c{i}" for i in range(100)] + [f"d{i}" for i in range(60)]
    labels = [0] * 100 + [1] * 60
    batch_size = 8
    train, held_out = _pets_data.split(paths, labels, eval_fraction=0.2)
    assert set(held_out[1][: 2 * batch_size]) == {0, 1}
    assert held_out[1][:4] == [0, 1, 0, 1]
    assert held_out[0][:2] == ["c4", "d4"]
    # Still every image once, and the same files as before, in either list.
    assert sorted(held_out[0]) == sorted(
        [f"c{i}" for i in range(4, 100, 5)] + [f"d{i}" for i in range(4, 60, 5)]
    )
    assert sorted(train[0] + held_out[0]) == sorted(paths)
    assert all(p[0] == "cd"[y] for p, y in zip(*held_out))


def test_one_image_per_class_is_too_few_to_evaluate():
    from recipes import _pets_data

    with pytest.raises(ValueError, match="too few images.*at least 2. Got: 1 cat and 1 dog"):
        _pets_data.split(["c0", "d0"], [0, 1], eval_fraction=0.2)


def test_cache_and_data_dirs_with_tilde_are_expanded(tmp_path, monkeypatch):
    from recipes import _pets_data

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    pet_images, new = _pets_data.generate_sample("~/cache", per_class=2, pixels=32)
    assert new and pet_images.startswith(str(tmp_path / "cache"))
    assert not (tmp_path / "~").exists()
    assert _pets_data.tfds_data_dir("~/tfds") == str(tmp_path / "tfds")


def _trained_before(model_dir, **flags):
    """A model_dir with a checkpoint and the record of the flags it was trained with."""
    from recipes import _previous_run as previous_run
    from tfest_kit._tf import tf2

    tf2.train.Checkpoint(v=tf2.Variable(1.0)).save(os.path.join(model_dir, "ckpt"))
    previous_run.record(str(model_dir), "mobilenet_cats_dogs", flags)


def test_bad_command_lines_are_one_line_errors_before_any_work(tmp_path):
    # One recipe process per case, forked after one import of the recipe (and TensorFlow).
    cases, checks = [], []

    def case(name, args, *fragments):
        directory = tmp_path / name
        (directory / "home").mkdir(parents=True, exist_ok=True)
        cases.append({"args": args, "env": _offline_env(directory)})
        checks.append((name, fragments))
        return directory

    case("bad_flag", ["--data=nope"], "--data")
    empty = tmp_path / "empty"
    (empty / "cats").mkdir(parents=True)
    (empty / "dogs").mkdir()
    case("empty", ["--data=images", f"--image_dir={empty}", *TEST_SIZE], "no usable images")
    imagenet = ["--weights=imagenet", "--image_size=96", "--alpha=0.35", "--data=sample"]
    case("offline", imagenet, "could not load MobileNetV2 weights", "--weights=none")
    weights = tmp_path / "not_weights.h5"
    weights.write_text("a text file")
    not_mobilenet = [*TEST_SIZE, f"--weights={weights}", "--data=sample"]
    case("not_mobilenet", not_mobilenet, str(weights), "include_top=False", "--alpha=0.35")
    damaged = tmp_path / "damaged" / "home" / ".keras" / "models"
    damaged.mkdir(parents=True)
    cached = damaged / "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_0.35_96_no_top.h5"
    cached.write_bytes(b"\x89HDF\r\n\x1a\n cut off")  # an interrupted download
    auto = [*TEST_SIZE, "--weights=auto", "--image_size=96", "--data=sample"]
    case("damaged", auto, str(cached), "is damaged: delete it")
    # "~" as the shell leaves it after "--model_dir=".
    a_file = tmp_path / "file" / "home" / "run"
    case(
        "file",
        [*TEST_SIZE, "--data=sample", "--model_dir=~/run"],
        "must be a directory",
        str(a_file),
    )
    a_file.write_text("a file")
    for flag in ("--log_every=0", "--learning_rate=0"):
        case(flag, [*TEST_SIZE, flag], f"{flag.split('=')[0]} must be positive")
    home = tmp_path / "below_a_file" / "home"
    unusable = [*TEST_SIZE, "--data=sample", "--sample_per_class=4", "--model_dir=~/a_file/run"]
    cannot = f"cannot create --model_dir {home / 'a_file' / 'run'}: Not a directory"
    case("below_a_file", [*unusable, f"--cache_dir={tmp_path / 'cache'}"], cannot)
    (home / "a_file").write_text("")
    # Another held-out fraction or another sample put trained images in the held-out set.
    trained = {"image_size": 32, "alpha": 0.35, "data": "sample"}
    refused_reruns = {
        "fraction": (["--eval_fraction=0.5"], ["--eval_fraction=0.2;", "--eval_fraction=0.5."]),
        "sample": (["--sample_per_class=24"], ["--sample_per_class=16 ", "--sample_per_class=24 "]),
        "images": (["--data=images", "--image_dir=~/pets"], ["--data=sample ", "--image_dir="]),
    }
    before = {}
    for name, (rerun, fragments) in refused_reruns.items():
        model_dir = tmp_path / name / "model"
        _trained_before(model_dir, **trained, sample_per_class=16, eval_fraction=0.2)
        before[name] = sorted(os.listdir(model_dir))
        args = [*TEST_SIZE, "--data=sample", "--sample_per_class=16", "--eval_fraction=0.2"]
        args += [f"--cache_dir={tmp_path / name / 'cache'}", f"--model_dir={model_dir}", *rerun]
        case(name, args, "holds a checkpoint trained with --image_size=32", *fragments)

    procs = run_recipe_cases("mobilenet_cats_dogs", cases)
    for (name, fragments), proc in zip(checks, procs):
        assert proc.returncode == 1, (name, proc.stdout, proc.stderr)
        _assert_one_line_error(proc, *fragments)
    not_mobilenet_run = procs[3]  # a file that is not the weights: no offline hint
    assert "offline" not in not_mobilenet_run.stderr
    assert "internet" not in not_mobilenet_run.stderr
    for name in refused_reruns:
        assert sorted(os.listdir(tmp_path / name / "model")) == before[name]
        assert not (tmp_path / name / "cache").exists()  # refused before the sample is made


def test_help_names_the_from_scratch_defaults_and_another_recipes_dir_is_refused(tmp_path):
    # The default offline run trains from scratch at 96 px, alpha 0.35: --help said 160 / 1.0.
    proc = run_program([*RECIPE, "--help"], env=_offline_env(tmp_path), check_exit=0)
    help_text = " ".join(proc.stdout.split())
    assert "96 when training from scratch" in help_text, proc.stdout
    assert "0.35 when training from scratch" in help_text, proc.stdout

    # An iris_custom_estimator run: this recipe used to say "already trained to step 200" of
    # iris' checkpoint, then end in a traceback.
    model_dir = tmp_path / "iris"
    from recipes import _previous_run as previous_run
    from tfest_kit._tf import tf2

    tf2.train.Checkpoint(v=tf2.Variable(1.0)).save(os.path.join(model_dir, "ckpt"))
    previous_run.record(str(model_dir), "iris_custom_estimator", {"seed": 0})
    before = sorted(os.listdir(model_dir))
    proc = run_program(
        [*RECIPE, *TEST_SIZE, "--data=sample", f"--cache_dir={tmp_path / 'cache'}"]
        + [f"--model_dir={model_dir}"],
        env=_offline_env(tmp_path),
        check_exit=1,
    )
    _assert_one_line_error(
        proc, f"--model_dir {model_dir} holds a run of recipe iris_custom_estimator", "another"
    )
    assert "already trained" not in proc.stdout
    assert sorted(os.listdir(model_dir)) == before
    assert not (tmp_path / "cache").exists()  # refused before the sample is generated
