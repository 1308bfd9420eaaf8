"""TF1's MNIST reader under the runner: ``tensorflow.examples.tutorials.mnist.input_data``.

tests/legacy_scripts/mnist_softmax.py (TF1's softmax tutorial) runs through ``python -m
tfest_kit.legacy`` on small MNIST files written here in the real idx ``.gz`` format; the port's
arrays are checked against the ones written.  Nothing here reaches the internet: downloads go
to a closed port on 127.0.0.1 (``source_url``, an argument of TF 1.15's ``read_data_sets``).
"""

from __future__ import annotations

import gzip
import io
import socket
import struct

import numpy as np
import pytest

from tests.conftest import ROOT, run_program, write_module
from tfest_kit._tf import tf
from tfest_kit.legacy.contrib import _learn_datasets as mnist

SCRIPT = ROOT / "tests" / "legacy_scripts" / "mnist_softmax.py"
FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


def _write_mnist(directory, n_train=6000, n_test=500):
    """MNIST-like idx files: a bright 5x5 patch whose place is the label, on noise."""
    rng = np.random.RandomState(0)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.randint(0, 10, n).astype(np.uint8)
        images = rng.randint(0, 80, (n, 28, 28)).astype(np.uint8)
        for i, k in enumerate(labels):
            row, col = 4 + 8 * (k // 4), 2 + 6 * (k % 4)
            images[i, row : row + 5, col : col + 5] = 220
        with gzip.open(directory / f"{prefix}-images-idx3-ubyte.gz", "wb") as f:
            f.write(struct.pack(">IIII", 2051, n, 28, 28) + images.tobytes())
        with gzip.open(directory / f"{prefix}-labels-idx1-ubyte.gz", "wb") as f:
            f.write(struct.pack(">II", 2049, n) + labels.tobytes())
        arrays[prefix] = images, labels
    return arrays


def _closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


# Every download attempt goes to a closed local port, whatever the URL.
def _offline_env():
    proxy = _closed_port_url()
    return {"http_proxy": proxy, "https_proxy": proxy, "no_proxy": "", "NO_PROXY": ""}


def test_the_tf1_mnist_tutorial_runs_under_the_runner(tmp_path):
    _write_mnist(tmp_path / "MNIST_data")
    proc = run_program(
        [
            "-m",
            "tfest_kit.legacy",
            str(SCRIPT),
            "--data_dir=MNIST_data/",
            f"--source_url={_closed_port_url()}",
        ],
        cwd=tmp_path,
        env=_offline_env(),
        timeout=300,
    )
    out = proc.stdout
    # TF 1.15's lines: one per file read, then the tutorial's own.
    for name in FILES:
        assert f"Extracting MNIST_data/{name}" in out, out
    assert "train 1000, validation 5000, test 500" in out, out  # validation_size=5000
    losses = [float(line.rpartition(" ")[2]) for line in out.splitlines() if ", loss " in line]
    assert len(losses) == 4 and losses[0] == pytest.approx(np.log(10), rel=1e-4), out
    assert losses[-1] < 0.2 * losses[0], out
    # 200 batches of 100 over 1000 examples: next_batch completed 19 epochs, as TF 1.15's.
    accuracy = float(out.rpartition("test accuracy ")[2].split()[0])
    assert "epochs 19, test accuracy" in out and accuracy > 0.9, out


def test_read_data_sets_gives_tf115_arrays(tmp_path):
    arrays = _write_mnist(tmp_path, n_train=300, n_test=40)
    train_images, train_labels = arrays["train"]
    data = mnist.read_data_sets(str(tmp_path), one_hot=True, validation_size=100)
    assert data.train.images.shape == (200, 784) and data.train.images.dtype == np.float32
    assert data.validation.num_examples == 100 and data.test.num_examples == 40
    # The validation set is the first validation_size training examples.
    np.testing.assert_allclose(
        data.validation.images, train_images[:100].reshape(100, 784) / 255.0, rtol=1e-6
    )
    np.testing.assert_array_equal(data.validation.labels.argmax(1), train_labels[:100])
    assert data.train.labels.shape == (200, 10) and data.train.labels.sum(1).tolist() == [1] * 200
    raw = mnist.read_data_sets(
        str(tmp_path), reshape=False, dtype=tf.uint8, validation_size=0, seed=3
    )
    assert raw.train.images.shape == (300, 28, 28, 1) and raw.train.images.dtype == np.uint8
    np.testing.assert_array_equal(raw.train.images[..., 0], train_images)
    np.testing.assert_array_equal(raw.train.labels, train_labels)
    with pytest.raises(ValueError, match="Validation size should be between 0 and 300"):
        mnist.read_data_sets(str(tmp_path), validation_size=301)
    with pytest.raises(TypeError, match="Invalid image dtype"):
        mnist.read_data_sets(str(tmp_path), dtype=tf.int32, validation_size=0)


def test_next_batch_shuffles_each_epoch_and_completes_the_last_batch():
    images = np.arange(10, dtype=np.uint8).reshape(10, 1, 1, 1)
    data = mnist.DataSet(images, np.arange(10), dtype=tf.uint8, seed=5)
    seen = [data.next_batch(4)[1] for _ in range(2)]
    rest, _ = data.next_batch(4)  # 2 of the first epoch, 2 of the second
    assert data.epochs_completed == 1 and len(rest) == 4
    assert sorted(np.concatenate([*seen, rest[:2, 0]])) == list(range(10))
    assert seen[0].tolist() != [0, 1, 2, 3]  # shuffled
    ordered = mnist.DataSet(images, np.arange(10), dtype=tf.uint8)
    assert ordered.next_batch(4, shuffle=False)[1].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="Invalid magic number 2049 in MNIST image file"):
        mnist.extract_images(_Named(gzip.compress(struct.pack(">II", 2049, 0)), "labels.gz"))


class _Named:
    """A file object with a name, as TF 1.15's extract_* functions read."""

    def __init__(self, data: bytes, name: str) -> None:
        self._file, self.name = io.BytesIO(data), name

    def read(self, *args):
        return self._file.read(*args)


def test_offline_read_data_sets_names_the_files_the_directory_and_the_fix(tmp_path):
    empty = tmp_path / "empty"
    proc = run_program(
        [
            "-m",
            "tfest_kit.legacy",
            str(SCRIPT),
            f"--data_dir={empty}",
            f"--source_url={_closed_port_url()}",
        ],
        env=_offline_env(),
        timeout=300,
        check_exit=1,
    )
    assert "MnistDownloadError" in proc.stderr, proc.stderr
    message = proc.stderr.rpartition("MnistDownloadError: ")[2]
    for name in FILES:
        assert name in message, message
    assert str(empty) in message and "put them in that directory" in message, message
    assert "Connection refused" in message, message


def test_tf1_spellings_of_the_mnist_reader_resolve_to_one_module(tmp_path):
    script = tmp_path / "spellings.py"
    write_module(
        script,
        """
        import tensorflow as tf
        from tensorflow.contrib.learn.python.learn.datasets import base, mnist
        from tensorflow.contrib.learn.python.learn.datasets.mnist import DataSet
        from tensorflow.examples.tutorials.mnist import input_data
        import tensorflow.examples.tutorials.mnist.input_data as input_data2

        print("SAME", mnist is tf.contrib.learn.datasets.mnist,
              input_data.read_data_sets is mnist.read_data_sets is input_data2.read_data_sets,
              DataSet is tf.contrib.learn.datasets.mnist.DataSet,
              base.Datasets._fields)
        try:
            tf.contrib.learn.datasets.load_dataset("iris")
        except AttributeError as e:
            print("REFUSED", e)
        """,
    )
    proc = run_program(["-m", "tfest_kit.legacy", str(script)], timeout=120)
    assert "SAME True True True ('train', 'validation', 'test')" in proc.stdout, proc.stdout
    assert "REFUSED tf.contrib.learn.datasets.load_dataset" in proc.stdout, proc.stdout
    assert "tf.keras.datasets" in proc.stdout, proc.stdout
