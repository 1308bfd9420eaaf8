"""``tf.contrib.learn.datasets``' ``mnist`` and ``base``, and the tutorials' ``input_data``: a port.

TF1 tutorials begin with ``input_data.read_data_sets("MNIST_data/", one_hot=True)``: TF 1.15's
``tensorflow/examples/tutorials/mnist/input_data.py`` re-exported ``read_data_sets`` of
``tensorflow.contrib.learn.python.learn.datasets.mnist``, which reads MNIST's four idx ``.gz``
files from ``train_dir`` and downloads those missing from ``source_url``.  TensorFlow 2 has
nothing that reads them (``tf.keras.datasets.mnist`` downloads one ``.npz``), so this is a port of
TF 1.15's pure-Python code: the same ``Extracting …`` lines, the same arrays (``one_hot``,
``reshape``, ``dtype``, ``validation_size``), the same ``next_batch`` order, NumPy being seeded
as TF 1.15 seeded it (``DataSet`` seeds it from ``seed``, else from the graph's seed).  A failed
download (offline) raises :class:`MnistDownloadError` naming the four files, the directory and
the fix, where TF 1.15 raised urllib's error; TF 1.15's retries of a timed-out download are
left out.

Example:

    mnist = read_data_sets("MNIST_data/", one_hot=True)
    batch_xs, batch_ys = mnist.train.next_batch(100)   # (100, 784) float32, (100, 10)
"""

from __future__ import annotations

import collections
import gzip
import os
import shutil
import tempfile
import urllib.request
from typing import IO, Any

import numpy as np

from tfest_kit._checks import TfestKitError
from tfest_kit._tf import tf

__all__ = [
    "DEFAULT_SOURCE_URL",
    "DataSet",
    "read_data_sets",
    "load_mnist",
    "extract_images",
    "extract_labels",
    "dense_to_one_hot",
    "Datasets",
    "Dataset",
    "maybe_download",
    "MnistDownloadError",
    "MNIST_NAMES",
    "BASE_NAMES",
    "NOT_SERVED",
]

MNIST_NAMES = __all__[:7]
BASE_NAMES = __all__[7:10]
# TF 1.15's other names of tf.contrib.learn.datasets, with what replaces them.
NOT_SERVED = {
    name: "tf.keras.datasets (boston_housing, …) or reading the files with tf.data"
    for name in ("load_dataset", "make_dataset", "DATASETS", "SYNTHETIC", "synthetic")
}
NOT_SERVED["text_datasets"] = "tf.keras.datasets or tensorflow-datasets (dbpedia)"

# CVDF mirror of http://yann.lecun.com/exdb/mnist/, TF 1.15's default.
DEFAULT_SOURCE_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)

Dataset = collections.namedtuple("Dataset", ["data", "target"])
Datasets = collections.namedtuple("Datasets", ["train", "validation", "test"])


class MnistDownloadError(TfestKitError, OSError):
    """A file ``read_data_sets`` needs is not in ``train_dir`` and could not be downloaded."""


def maybe_download(filename: str, work_directory: str, source_url: str) -> str:
    """TF 1.15's ``base.maybe_download``: ``work_directory/filename``, downloaded if missing.

    Raises:
      OSError: (urllib's ``URLError`` …) when the download fails.
    """
    if not tf.gfile.Exists(work_directory):
        tf.gfile.MakeDirs(work_directory)
    filepath = os.path.join(work_directory, filename)
    if not tf.gfile.Exists(filepath):
        with tempfile.TemporaryDirectory() as tmp:
            temp_file_name = os.path.join(tmp, filename)
            with urllib.request.urlopen(source_url) as response, open(temp_file_name, "wb") as f:
                shutil.copyfileobj(response, f)
            tf.gfile.Copy(temp_file_name, filepath)
        size = tf.gfile.Stat(filepath).length
        print("Successfully downloaded", filename, size, "bytes.")
    return filepath


def _read32(bytestream: IO[bytes]) -> int:
    dt = np.dtype(np.uint32).newbyteorder(">")
    return int(np.frombuffer(bytestream.read(4), dtype=dt)[0])


def extract_images(f: Any) -> np.ndarray:
    """The images of an idx3 ``.gz`` file object as a uint8 array ``[index, y, x, 1]``.

    Raises:
      ValueError: if the file does not start with the magic number 2051.
    """
    print("Extracting", f.name)
    with gzip.GzipFile(fileobj=f) as bytestream:
        magic = _read32(bytestream)
        if magic != 2051:
            raise ValueError(f"Invalid magic number {magic} in MNIST image file: {f.name}")
        num_images = _read32(bytestream)
        rows = _read32(bytestream)
        cols = _read32(bytestream)
        buf = bytestream.read(rows * cols * num_images)
        data = np.frombuffer(buf, dtype=np.uint8)
        return data.reshape(num_images, rows, cols, 1)


def dense_to_one_hot(labels_dense: np.ndarray, num_classes: int) -> np.ndarray:
    """Class labels as one-hot rows (float64, as TF 1.15's)."""
    num_labels = labels_dense.shape[0]
    index_offset = np.arange(num_labels) * num_classes
    labels_one_hot = np.zeros((num_labels, num_classes))
    labels_one_hot.flat[index_offset + labels_dense.ravel()] = 1
    return labels_one_hot


def extract_labels(f: Any, one_hot: bool = False, num_classes: int = 10) -> np.ndarray:
    """The labels of an idx1 ``.gz`` file object: uint8 ``[index]``, or one-hot rows.

    Raises:
      ValueError: if the file does not start with the magic number 2049.
    """
    print("Extracting", f.name)
    with gzip.GzipFile(fileobj=f) as bytestream:
        magic = _read32(bytestream)
        if magic != 2049:
            raise ValueError(f"Invalid magic number {magic} in MNIST label file: {f.name}")
        num_items = _read32(bytestream)
        labels = np.frombuffer(bytestream.read(num_items), dtype=np.uint8)
        if one_hot:
            return dense_to_one_hot(labels, num_classes)
        return labels


class DataSet:
    """TF 1.15's MNIST ``DataSet``: images, labels and ``next_batch``.

    ``dtype`` ``uint8`` keeps the pixels in ``[0, 255]``, ``float32`` rescales them into
    ``[0, 1]``; ``reshape`` flattens ``[n, 28, 28, 1]`` to ``[n, 784]``.  As in TF 1.15, the
    constructor seeds NumPy's global generator (from ``seed``, else the graph's seed, else
    afresh), which ``next_batch`` shuffles with.
    """

    def __init__(
        self,
        images: Any,
        labels: Any,
        fake_data: bool = False,
        one_hot: bool = False,
        dtype: Any = tf.float32,
        reshape: bool = True,
        seed: Any = None,
    ) -> None:
        seed1, seed2 = tf.get_seed(seed)
        np.random.seed(seed1 if seed is None else seed2)
        dtype = tf.as_dtype(dtype).base_dtype
        if dtype not in (tf.uint8, tf.float32):
            raise TypeError(f"Invalid image dtype {dtype!r}, expected uint8 or float32")
        if fake_data:
            self._num_examples = 10000
            self.one_hot = one_hot
        else:
            if images.shape[0] != labels.shape[0]:
                raise ValueError(
                    f"images and labels must have as many rows. Got: images.shape "
                    f"{images.shape}, labels.shape {labels.shape}"
                )
            self._num_examples = images.shape[0]
            if reshape:
                images = images.reshape(images.shape[0], images.shape[1] * images.shape[2])
            if dtype == tf.float32:
                images = np.multiply(images.astype(np.float32), 1.0 / 255.0)
        self._images = images
        self._labels = labels
        self._epochs_completed = 0
        self._index_in_epoch = 0

    @property
    def images(self) -> Any:
        return self._images

    @property
    def labels(self) -> Any:
        return self._labels

    @property
    def num_examples(self) -> int:
        return self._num_examples

    @property
    def epochs_completed(self) -> int:
        return self._epochs_completed

    def next_batch(self, batch_size: int, fake_data: bool = False, shuffle: bool = True) -> tuple:
        """The next ``batch_size`` examples; an epoch's last batch is completed from the next."""
        if fake_data:
            fake_image = [1] * 784
            fake_label = [1] + [0] * 9 if self.one_hot else 0
            return [fake_image] * batch_size, [fake_label] * batch_size
        start = self._index_in_epoch
        if self._epochs_completed == 0 and start == 0 and shuffle:
            self._shuffle()
        if start + batch_size <= self._num_examples:
            self._index_in_epoch += batch_size
            end = self._index_in_epoch
            return self._images[start:end], self._labels[start:end]
        self._epochs_completed += 1
        images_rest = self._images[start : self._num_examples]
        labels_rest = self._labels[start : self._num_examples]
        if shuffle:
            self._shuffle()
        self._index_in_epoch = batch_size - (self._num_examples - start)
        end = self._index_in_epoch
        return (
            np.concatenate((images_rest, self._images[:end]), axis=0),
            np.concatenate((labels_rest, self._labels[:end]), axis=0),
        )

    def _shuffle(self) -> None:
        perm = np.arange(self._num_examples)
        np.random.shuffle(perm)
        self._images = self._images[perm]
        self._labels = self._labels[perm]


def _download(filename: str, train_dir: str, source_url: str) -> str:
    try:
        return maybe_download(filename, train_dir, source_url + filename)
    except OSError as e:
        missing = [name for name in _FILES if not os.path.exists(os.path.join(train_dir, name))]
        raise MnistDownloadError(
            f"read_data_sets: {filename} is not in {train_dir!r} and could not be downloaded "
            f"from {source_url + filename} ({e}). MNIST needs the four files "
            f"{', '.join(_FILES)} in {os.path.abspath(train_dir)} (missing: "
            f"{', '.join(missing)}): download them from {source_url} where there is a "
            "network and put them in that directory."
        ) from e


def read_data_sets(
    train_dir: str,
    fake_data: bool = False,
    one_hot: bool = False,
    dtype: Any = tf.float32,
    reshape: bool = True,
    validation_size: int = 5000,
    seed: Any = None,
    source_url: str = DEFAULT_SOURCE_URL,
) -> Datasets:
    """TF 1.15's ``read_data_sets``: MNIST's train, validation and test ``DataSet`` s.

    The validation set is the first ``validation_size`` training examples.

    Raises:
      MnistDownloadError: (an ``OSError``) when a file is missing and its download fails.
      ValueError: if ``validation_size`` is not between 0 and the number of training images.
    """
    if fake_data:

        def fake() -> DataSet:
            return DataSet([], [], fake_data=True, one_hot=one_hot, dtype=dtype, seed=seed)

        return Datasets(train=fake(), validation=fake(), test=fake())
    source_url = source_url or DEFAULT_SOURCE_URL
    arrays = []
    for filename in _FILES:
        with tf.gfile.Open(_download(filename, train_dir, source_url), "rb") as f:
            if "images" in filename:
                arrays.append(extract_images(f))
            else:
                arrays.append(extract_labels(f, one_hot=one_hot))
    train_images, train_labels, test_images, test_labels = arrays
    if not 0 <= validation_size <= len(train_images):
        raise ValueError(
            f"Validation size should be between 0 and {len(train_images)}. "
            f"Received: {validation_size}."
        )
    options = {"dtype": dtype, "reshape": reshape, "seed": seed}
    train = DataSet(train_images[validation_size:], train_labels[validation_size:], **options)
    validation = DataSet(train_images[:validation_size], train_labels[:validation_size], **options)
    test = DataSet(test_images, test_labels, **options)
    return Datasets(train=train, validation=validation, test=test)


def load_mnist(train_dir: str = "MNIST-data") -> Datasets:
    """TF 1.15's ``load_mnist``: ``read_data_sets(train_dir)``."""
    return read_data_sets(train_dir)
