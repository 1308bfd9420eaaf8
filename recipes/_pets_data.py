"""Cats-vs-dogs data for recipes.mobilenet_cats_dogs: folders, the built-in sample, tfds.

Three sources end in the same ``input_fn`` shape — ``(images float32 [N, S, S, 3] in [-1, 1],
labels float32 [N, 1])`` with cat = 0 and dog = 1, as in tfds ``cats_vs_dogs``:

* an image folder in the Kaggle / Microsoft ``PetImages/{Cat,Dog}`` layout (or ``cats/ dogs/``),
  checked up front so corrupted files, and files that are not the format their name says, are
  skipped and counted, as tfds does (JPEG, PNG, BMP and GIF are read);
* a built-in sample written once into a cache directory in that same layout: procedurally drawn
  cat-like and dog-like faces (pointed ears, slit pupils, whiskers and tabby stripes against
  floppy ears, a snout, a big nose and round eyes) on random cluttered backgrounds, with three
  deliberately corrupted files;
* tfds ``cats_vs_dogs`` with the Estimator guide's preprocessing.

Example:

    root = generate_sample("/tmp/cache")
    found = scan_folder(root)                  # Found(paths, labels, skipped=[...])
    train, held_out = split(found.paths, found.labels, eval_fraction=0.2)
    input_fn = folder_input_fn(*train, image_size=96, batch_size=32, training=True)
"""

from __future__ import annotations

import glob
import io
import os
import shutil
import tempfile
from typing import NamedTuple, Optional

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from tfest_kit._tf import tf

__all__ = [
    "CLASS_NAMES",
    "Found",
    "default_cache_dir",
    "generate_sample",
    "scan_folder",
    "split",
    "folder_input_fn",
    "tfds_prepared",
    "tfds_input_fns",
    "tfds_examples",
]

CLASS_NAMES = ("cat", "dog")
SAMPLE_VERSION = "v1"
_CLASS_FOLDERS = (("cat", "cats"), ("dog", "dogs"))  # matched in any case
# File name suffix -> the format its content must have (PIL's name for it).
_FORMATS = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG", ".bmp": "BMP", ".gif": "GIF"}
# The modes tf.io.decode_image(channels=3) reads, where it does not read all (1-bit BMP).
_TF_MODES = {"JPEG": ("RGB", "L", "CMYK"), "BMP": ("L", "P", "RGB", "RGBA")}
_CACHE_LIMIT = 6000  # images; above this the decoded set would not fit comfortably in memory


class Found(NamedTuple):
    """Usable image paths with labels, and the files that were skipped as corrupted."""

    paths: list
    labels: list
    skipped: list


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/tfest_kit`` (``~/.cache/tfest_kit``), never the current directory."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfest_kit")


# ----------------------------------------------------------------------------- folders


def _child_dirs(root: str, names: tuple) -> list:
    """Sub-folders of ``root`` whose name is one of ``names`` in any case (``CATS``, ``Dog``)."""
    try:
        entries = os.listdir(root)
    except OSError:
        return []
    found = [os.path.join(root, e) for e in entries if e.lower() in names]
    return sorted(p for p in found if os.path.isdir(p))


def class_dirs(image_dir: str) -> tuple[str, str]:
    """Returns the (cat, dog) folders under ``image_dir`` (or ``image_dir/PetImages``).

    Folder names match in any case, singular or plural: ``Cat``, ``cats``, ``DOGS``.

    Raises:
      ValueError: if neither layout is there (the message lists what is), or a class has two
        folders (``cat/`` and ``Cats/``).
    """
    if not os.path.isdir(image_dir):
        raise ValueError(f"--image_dir {image_dir!r} is not a directory")
    for root in (*_child_dirs(image_dir, ("petimages",)), image_dir):
        cats, dogs = (_child_dirs(root, names) for names in _CLASS_FOLDERS)
        if cats and dogs:
            if len(cats) > 1 or len(dogs) > 1:
                raise ValueError(
                    f"--image_dir {image_dir!r} has more than one folder for a class: "
                    f"{[os.path.basename(p) for p in cats + dogs]}; keep one cat and one dog "
                    "folder"
                )
            return cats[0], dogs[0]
    listing = sorted(os.listdir(image_dir))[:10]
    raise ValueError(
        f"--image_dir {image_dir!r} has neither PetImages/Cat + PetImages/Dog nor cats/ + dogs/ "
        f"folders; it contains {listing}"
    )


def _is_good_image(path: str) -> bool:
    # Like tfds cats_vs_dogs, reject files whose content is not what their name says (the
    # Microsoft archive holds BMPs and empty files named .jpg), then decode fully so a
    # truncated file is caught here rather than halfway through training.
    expected = _FORMATS[os.path.splitext(path)[1].lower()]
    try:
        with open(path, "rb") as f:
            data = f.read()
        with Image.open(io.BytesIO(data)) as image:
            if image.format != expected:
                return False
            image.load()
            return image.mode in _TF_MODES.get(expected, (image.mode,))
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return False


def scan_folder(image_dir: str) -> Found:
    """Lists the JPEG, PNG, BMP and GIF files of both classes, checking each one.

    Raises:
      ValueError: if the layout is missing or no usable image is found.
    """
    paths, labels, skipped = [], [], []
    for label, folder in enumerate(class_dirs(image_dir)):
        names = sorted(n for n in os.listdir(folder) if n.lower().endswith(tuple(_FORMATS)))
        for name in names:
            path = os.path.join(folder, name)
            if _is_good_image(path):
                paths.append(path)
                labels.append(label)
            else:
                skipped.append(path)
    counts = [labels.count(0), labels.count(1)]
    if min(counts) == 0:
        raise ValueError(
            f"--image_dir {image_dir!r} has no usable images for "
            f"{[n for n, c in zip(CLASS_NAMES, counts) if c == 0]} "
            f"({len(skipped)} corrupted files skipped)"
        )
    return Found(paths, labels, skipped)


def split(paths: list, labels: list, eval_fraction: float) -> tuple[tuple, tuple]:
    """Deterministic held-out split: every k-th file of each class goes to evaluation.

    A class with fewer than k files still gives its last one to evaluation (if it has two),
    so that a small folder is evaluated on both classes.

    The held-out files alternate cat, dog, cat, … (the rest of the larger class last), so
    that ``--eval_steps=N`` (the first N batches, read in order) scores both classes.

    Raises:
      ValueError: if no file can be held out (one file per class).
    """
    if not 0.0 < eval_fraction < 1.0:
        raise ValueError(f"--eval_fraction must be in (0, 1). Got: {eval_fraction}")
    every = max(2, round(1.0 / eval_fraction))
    train, held_out = ([], []), ([], [])
    for label in (0, 1):
        members = [p for p, lab in zip(paths, labels) if lab == label]
        for i, path in enumerate(members):
            last_of_few = len(members) < every and len(members) >= 2 and i == len(members) - 1
            target = held_out if i % every == every - 1 or last_of_few else train
            target[0].append(path)
            target[1].append(label)
    if not held_out[0]:
        raise ValueError(
            "too few images to hold any out for evaluation: each class needs at least 2. "
            f"Got: {labels.count(0)} cat and {labels.count(1)} dog images"
        )
    return train, _interleaved(*held_out)


def _interleaved(paths: list, labels: list) -> tuple[list, list]:
    """``paths`` (cats first, then dogs) reordered cat, dog, cat, …; the extra ones last."""
    by_class = [[p for p, lab in zip(paths, labels) if lab == label] for label in (0, 1)]
    pairs = []
    for i in range(max(map(len, by_class))):
        pairs += [(members[i], label) for label, members in enumerate(by_class) if i < len(members)]
    return [p for p, _ in pairs], [lab for _, lab in pairs]


def _load(path, label, image_size: int):
    # decode_image reads PNG, BMP and GIF (first frame) too, as image_bytes_receiver does.
    image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
    image = tf.image.resize(tf.cast(image, tf.float32), (image_size, image_size))
    # Same arithmetic as tfest_kit.serving.image_bytes_receiver's default: [0, 255] -> [-1, 1].
    return image / 127.5 - 1.0, tf.reshape(tf.cast(label, tf.float32), [1])


def folder_input_fn(paths, labels, *, image_size: int, batch_size: int, training: bool):
    """An Estimator ``input_fn`` reading the given files with tf.data."""
    paths, labels = list(paths), list(labels)

    def input_fn():
        ds = tf.data.Dataset.from_tensor_slices((paths, labels))
        ds = ds.map(lambda p, y: _load(p, y, image_size), num_parallel_calls=tf.data.AUTOTUNE)
        if len(paths) <= _CACHE_LIMIT:
            ds = ds.cache()
        if training:
            ds = ds.shuffle(min(len(paths), 2000), seed=0).repeat()
            ds = ds.map(lambda x, y: (tf.image.random_flip_left_right(x), y))
        return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)

    return input_fn


# ----------------------------------------------------------------------------- tfds


def tfds_data_dir(data_dir: Optional[str]) -> str:
    """The directory tfds reads: ``data_dir``, ``$TFDS_DATA_DIR`` or ``~/tensorflow_datasets``."""
    return os.path.expanduser(
        data_dir or os.environ.get("TFDS_DATA_DIR") or os.path.join("~", "tensorflow_datasets")
    )


def tfds_prepared(data_dir: Optional[str]) -> bool:
    """Whether cats_vs_dogs is already prepared on disk (looked up without importing tfds)."""
    pattern = os.path.join(tfds_data_dir(data_dir), "cats_vs_dogs", "*", "dataset_info.json")
    return bool(glob.glob(pattern))


def _import_tfds():
    """Imports tensorflow_datasets with its Google Cloud Storage look-ups off.

    cats_vs_dogs downloads from its original host; tfds would first look for prepared files
    and dataset metadata on GCS, and TensorFlow's GCS client probes the GCE metadata server
    for credentials. Neither is needed here, and neither should be reached unasked.
    """
    os.environ.setdefault("NO_GCE_CHECK", "true")
    import tensorflow_datasets as tfds

    # The switch tfds documents for machines that cannot reach GCS.
    tfds.core.utils.gcs_utils._is_gcs_disabled = True
    return tfds


def _check_download_reachable() -> None:
    """Raises at once, with one line, when the cats_vs_dogs download cannot be reached.

    tfds retries a failed download ten times with growing back-off (minutes, offline) and
    prints every retry; one request without retries tells the same thing in a second.
    """
    import requests

    from tensorflow_datasets.image_classification import cats_vs_dogs

    url = getattr(cats_vs_dogs, "_URL", None)
    if not url:
        return
    try:
        requests.head(url, timeout=15, allow_redirects=True)
    except requests.RequestException as e:
        raise RuntimeError(
            f"could not prepare tfds cats_vs_dogs: its download ({url.split('/')[2]}) is not "
            f"reachable (offline? the download needs internet access): {type(e).__name__}"
        ) from e


def tfds_input_fns(data_dir: Optional[str], *, image_size: int, batch_size: int):
    """Train / held-out input_fns over tfds cats_vs_dogs (80 % / 20 % of its only split).

    Raises:
      RuntimeError: with a one-line reason when tfds is missing or the data cannot be loaded.
    """
    try:
        tfds = _import_tfds()
    except ImportError as e:
        raise RuntimeError(f"tensorflow_datasets is not installed ({e})") from e
    directory = tfds_data_dir(data_dir)
    if not tfds_prepared(data_dir):
        _check_download_reachable()
    try:
        # Prepare here (a no-op when already prepared), outside any Estimator graph, so a
        # failed download is reported plainly instead of from inside the input pipeline.
        tfds.builder("cats_vs_dogs", data_dir=directory).download_and_prepare()
    except Exception as e:  # noqa: BLE001 - tfds raises many types; report the first line
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RuntimeError(
            f"could not prepare tfds cats_vs_dogs in {directory} (offline? the download needs "
            f"internet access): {type(e).__name__}: {reason[:300]}"
        ) from e

    def make(split_name: str, training: bool):
        def input_fn():
            ds = tfds.load("cats_vs_dogs", split=split_name, as_supervised=True, data_dir=directory)

            def prep(image, label):
                # The guide's preprocessing: cast, scale to [-1, 1], resize.
                image = tf.cast(image, tf.float32)
                image = image / 127.5 - 1.0
                image = tf.image.resize(image, (image_size, image_size))
                return image, tf.reshape(tf.cast(label, tf.float32), [1])

            ds = ds.map(prep, num_parallel_calls=tf.data.AUTOTUNE)
            if training:
                ds = ds.shuffle(1000, seed=0).repeat()
            return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)

        return input_fn

    return make("train[:80%]", True), make("train[80%:]", False)


def tfds_examples(data_dir: Optional[str], count: int) -> list:
    """``count`` held-out tfds images as (name, label, JPEG bytes), for the exported model."""
    tfds = _import_tfds()

    ds = tfds.load(
        "cats_vs_dogs", split="train[80%:]", as_supervised=True, data_dir=tfds_data_dir(data_dir)
    )
    examples = []
    for i, (image, label) in enumerate(tfds.as_numpy(ds.take(count))):
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, "JPEG", quality=95)
        examples.append((f"cats_vs_dogs/train[80%:][{i}]", int(label), buffer.getvalue()))
    return examples


# ----------------------------------------------------------------------------- sample


def generate_sample(
    cache_dir: str, per_class: int = 400, pixels: int = 128, seed: int = 0
) -> tuple[str, bool]:
    """Writes the built-in sample once; returns (its PetImages directory, whether it was new).

    The set is written to a temporary sibling and renamed into place, so an interrupted run
    never leaves a half-written sample behind.
    """
    cache_dir = os.path.expanduser(cache_dir)  # "--cache_dir=~/x" reaches us unexpanded
    root = os.path.join(cache_dir, f"cats_dogs_sample_{SAMPLE_VERSION}_{per_class}_{pixels}")
    pet_images = os.path.join(root, "PetImages")
    if os.path.isfile(os.path.join(root, "COMPLETE")):
        return pet_images, False
    os.makedirs(cache_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".sample_", dir=cache_dir)
    rng = np.random.default_rng(seed)
    for label, folder in enumerate(("Cat", "Dog")):
        os.makedirs(os.path.join(staging, "PetImages", folder))
        for i in range(per_class):
            image = _draw_face(rng, dog=bool(label), pixels=pixels)
            path = os.path.join(staging, "PetImages", folder, f"{i}.jpg")
            image.save(path, "JPEG", quality=int(rng.integers(70, 96)))
    _write_corrupted(os.path.join(staging, "PetImages"))
    with open(os.path.join(staging, "COMPLETE"), "w") as f:
        f.write(f"{2 * per_class} images + 3 corrupted, seed {seed}\n")
    complete = os.path.join(root, "COMPLETE")
    if not os.path.isfile(complete) and os.path.isdir(root):  # an incomplete older attempt
        shutil.rmtree(root, ignore_errors=True)
    try:
        os.replace(staging, root)
    except OSError:
        # Another process (a task of the same cluster) renamed its identical copy into place
        # first: it may be reading it, so it stays.
        if not os.path.isfile(complete):
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return pet_images, True


def _write_corrupted(pet_images: str) -> None:
    # The three ways the real PetImages archive is broken: cut-off, empty, not a JPEG at all.
    with open(os.path.join(pet_images, "Cat", "0.jpg"), "rb") as f:
        data = f.read()
    with open(os.path.join(pet_images, "Cat", "corrupt_truncated.jpg"), "wb") as f:
        f.write(data[: len(data) // 2])
    open(os.path.join(pet_images, "Dog", "corrupt_empty.jpg"), "wb").close()
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (255, 0, 0)).save(buffer, "PNG")
    with open(os.path.join(pet_images, "Dog", "corrupt_png_named_jpg.jpg"), "wb") as f:
        f.write(buffer.getvalue())


_CAT_FUR = ((220, 140, 60), (140, 140, 150), (45, 45, 45), (235, 235, 228), (230, 200, 150))
_DOG_FUR = ((140, 90, 50), (210, 165, 90), (40, 35, 30), (235, 230, 225), (170, 100, 60))


def _jitter(rng, colour, amount=25):
    return tuple(int(np.clip(c + rng.integers(-amount, amount + 1), 0, 255)) for c in colour)


def _shade(colour, factor):
    return tuple(int(np.clip(c * factor, 0, 255)) for c in colour)


def _background(rng, pixels: int) -> Image.Image:
    top, bottom = rng.integers(30, 226, size=(2, 3))
    ramp = np.linspace(0.0, 1.0, pixels)[:, None, None]
    array = (top * (1 - ramp) + bottom * ramp) * np.ones((1, pixels, 1))
    image = Image.fromarray(array.astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(2, 8))):  # clutter shared by both classes
        x0, y0 = rng.integers(0, pixels, size=2)
        x1, y1 = x0 + rng.integers(8, pixels // 2), y0 + rng.integers(8, pixels // 2)
        colour = tuple(int(c) for c in rng.integers(20, 236, size=3))
        if rng.random() < 0.5:
            draw.rectangle((x0, y0, x1, y1), fill=colour)
        else:
            draw.ellipse((x0, y0, x1, y1), fill=colour)
    return image


def _draw_face(rng, *, dog: bool, pixels: int) -> Image.Image:
    image = _background(rng, pixels)
    draw = ImageDraw.Draw(image)
    cx, cy = rng.uniform(0.38, 0.62, size=2) * pixels
    r = rng.uniform(0.17, 0.26) * pixels
    palette = _DOG_FUR if dog else _CAT_FUR
    fur = _jitter(rng, palette[int(rng.integers(len(palette)))])
    dark = _shade(fur, 0.55) if sum(fur) > 200 else _shade((120, 110, 100), 1.0)
    if dog:
        _draw_dog(rng, draw, cx, cy, r, fur, dark)
    else:
        _draw_cat(rng, draw, cx, cy, r, fur, dark)
    if rng.random() < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    image = image.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.0, 1.0))))
    noise = rng.normal(0.0, rng.uniform(3, 12), size=(pixels, pixels, 3))
    array = np.clip(np.asarray(image, np.float32) + noise, 0, 255).astype(np.uint8)
    return Image.fromarray(array, "RGB")


def _draw_cat(rng, draw, cx, cy, r, fur, dark):
    tilt = rng.uniform(-0.15, 0.15) * r
    for side in (-1, 1):  # pointed ears standing up
        base_in, base_out = cx + side * 0.15 * r, cx + side * 0.95 * r
        tip = (cx + side * 0.65 * r + tilt, cy - 1.55 * r)
        draw.polygon([(base_in, cy - 0.6 * r), (base_out, cy - 0.2 * r), tip], fill=fur)
        inner_tip = (tip[0] * 0.8 + cx * 0.2, tip[1] * 0.8 + cy * 0.2 - 0.1 * r)
        draw.polygon(
            [
                (cx + side * 0.35 * r, cy - 0.55 * r),
                (cx + side * 0.75 * r, cy - 0.3 * r),
                inner_tip,
            ],
            fill=(230, 150, 160),
        )
    draw.ellipse((cx - r, cy - 0.9 * r, cx + r, cy + 0.85 * r), fill=fur)
    if rng.random() < 0.7:  # tabby stripes on the forehead
        for k in (-1, 0, 1):
            x = cx + k * 0.25 * r
            draw.line((x, cy - 0.85 * r, x + k * 0.05 * r, cy - 0.45 * r), fill=dark, width=3)
    iris = _jitter(rng, (120, 200, 60) if rng.random() < 0.5 else (220, 200, 40), 20)
    for side in (-1, 1):  # almond eyes with slit pupils
        ex, ey = cx + side * 0.4 * r, cy - 0.15 * r
        draw.ellipse((ex - 0.22 * r, ey - 0.13 * r, ex + 0.22 * r, ey + 0.13 * r), fill=iris)
        draw.ellipse((ex - 0.04 * r, ey - 0.13 * r, ex + 0.04 * r, ey + 0.13 * r), fill=(0, 0, 0))
    draw.polygon(
        [(cx - 0.1 * r, cy + 0.2 * r), (cx + 0.1 * r, cy + 0.2 * r), (cx, cy + 0.32 * r)],
        fill=(230, 120, 140),
    )
    whisker = (250, 250, 250) if sum(fur) < 500 else (40, 40, 40)
    for side in (-1, 1):
        for dy in (-0.08, 0.05, 0.18):
            draw.line(
                (cx + side * 0.2 * r, cy + 0.3 * r, cx + side * 1.3 * r, cy + (0.3 + dy * 2) * r),
                fill=whisker,
                width=1,
            )


def _draw_dog(rng, draw, cx, cy, r, fur, dark):
    draw.ellipse((cx - 1.1 * r, cy - 0.9 * r, cx + 1.1 * r, cy + 0.9 * r), fill=fur)
    ear = dark if rng.random() < 0.7 else fur
    for side in (-1, 1):  # floppy ears hanging down the sides
        x = cx + side * 1.05 * r
        draw.ellipse((x - 0.35 * r, cy - 0.75 * r, x + 0.35 * r, cy + 0.8 * r), fill=ear)
    if rng.random() < 0.4:  # a patch around one eye
        side = rng.choice([-1, 1])
        ex = cx + side * 0.4 * r
        draw.ellipse((ex - 0.35 * r, cy - 0.5 * r, ex + 0.3 * r, cy + 0.15 * r), fill=dark)
    muzzle = _shade(fur, 1.25) if sum(fur) < 600 else _shade(fur, 0.9)
    draw.ellipse((cx - 0.55 * r, cy + 0.05 * r, cx + 0.55 * r, cy + 0.8 * r), fill=muzzle)
    for side in (-1, 1):  # round dark eyes
        ex, ey = cx + side * 0.4 * r, cy - 0.2 * r
        draw.ellipse(
            (ex - 0.13 * r, ey - 0.13 * r, ex + 0.13 * r, ey + 0.13 * r), fill=(25, 15, 10)
        )
    draw.ellipse((cx - 0.22 * r, cy + 0.12 * r, cx + 0.22 * r, cy + 0.4 * r), fill=(10, 10, 10))
    if rng.random() < 0.5:  # tongue
        draw.ellipse(
            (cx - 0.15 * r, cy + 0.6 * r, cx + 0.15 * r, cy + 1.0 * r), fill=(220, 90, 110)
        )
