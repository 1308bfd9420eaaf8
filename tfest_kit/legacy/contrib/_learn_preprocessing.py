"""``tf.contrib.learn.preprocessing``: TF 1.15's text vocabulary, a port.

TF1 text classifiers (a CNN over word ids is the classic) build their vocabulary with
``VocabularyProcessor``: it splits each document with TF 1.15's tokenizer regular expression,
gives each new token the next id (0 is ``<UNK>``, and the padding), pads or cuts every
document to ``max_document_length`` ids, and pickles itself to the run directory so that the
evaluation script restores the same ids.  Nothing maintained carries it on (Keras'
``Tokenizer`` lower-cases, filters punctuation and numbers its words by frequency), so this is a
port of TF 1.15's pure-Python code: the same ids, the same ``trim`` order, the same pickle
round trip.  ``CategoricalProcessor`` (categorical columns of a DataFrame) is not served.

Example:

    processor = VocabularyProcessor(max_document_length=5)
    ids = np.array(list(processor.fit_transform(["a good film", "a bad film"])))
    # [[1 2 3 0 0], [1 4 3 0 0]]; processor.save(path) / VocabularyProcessor.restore(path)
"""

from __future__ import annotations

import collections
import pickle
import re
from collections.abc import Iterable, Iterator
from typing import Any, Callable, Optional

import numpy as np

from tfest_kit._tf import tf

__all__ = [
    "CategoricalVocabulary",
    "VocabularyProcessor",
    "ByteProcessor",
    "tokenizer",
    "TOKENIZER_RE",
    "BACKING",
    "NOT_SERVED",
]

_PORT = "a port of TF 1.15's (tfest_kit.legacy.contrib, the same ids and pickle)"
BACKING = dict.fromkeys(__all__[:5], _PORT)
NOT_SERVED = {
    "CategoricalProcessor": (
        "sklearn.preprocessing.OrdinalEncoder or tf.keras.layers.StringLookup "
        "(TensorFlow 2 has no equivalent of learn's CategoricalProcessor)"
    ),
}

TOKENIZER_RE = re.compile(r"[A-Z]{2,}(?![a-z])|[A-Z][a-z]+(?=[A-Z])|[\'\w\-]+", re.UNICODE)


def tokenizer(iterator: Iterable[str]) -> Iterator[list[str]]:
    """TF 1.15's tokenizer: yields the tokens of each string (``TOKENIZER_RE.findall``)."""
    for value in iterator:
        yield TOKENIZER_RE.findall(value)


class CategoricalVocabulary:
    """TF 1.15's ``CategoricalVocabulary``: categories to ids, 0 for the unknown token.

    Example:

        vocab = CategoricalVocabulary()
        vocab.add("film"); vocab.freeze()
        vocab.get("film"), vocab.get("unseen")    # 1, 0
    """

    def __init__(self, unknown_token: str = "<UNK>", support_reverse: bool = True):
        self._unknown_token = unknown_token
        self._mapping = {unknown_token: 0}
        self._support_reverse = support_reverse
        if support_reverse:
            self._reverse_mapping = [unknown_token]
        self._freq = collections.defaultdict(int)
        self._freeze = False

    def __len__(self) -> int:
        """The number of ids, the unknown token's included."""
        return len(self._mapping)

    def freeze(self, freeze: bool = True) -> None:
        """Once frozen, new categories get the unknown id (0) instead of a new one."""
        self._freeze = freeze

    def get(self, category: Any) -> int:
        """The category's id; a new category gets the next id unless frozen (then 0)."""
        if category not in self._mapping:
            if self._freeze:
                return 0
            self._mapping[category] = len(self._mapping)
            if self._support_reverse:
                self._reverse_mapping.append(category)
        return self._mapping[category]

    def add(self, category: Any, count: int = 1) -> None:
        """Adds ``count`` to the category's frequency (giving it an id if new)."""
        if self.get(category) <= 0:
            return
        self._freq[category] += count

    def trim(self, min_frequency: int, max_frequency: int = -1) -> None:
        """Keeps the categories seen more than ``min_frequency`` times (and fewer than
        ``max_frequency`` when positive), renumbered 1… by frequency, then alphabetically."""
        self._freq = sorted(
            sorted(self._freq.items(), key=lambda x: (isinstance(x[0], str), x[0])),
            key=lambda x: x[1],
            reverse=True,
        )
        self._mapping = {self._unknown_token: 0}
        if self._support_reverse:
            self._reverse_mapping = [self._unknown_token]
        idx = 1
        for category, count in self._freq:
            if max_frequency > 0 and count >= max_frequency:
                continue
            if count <= min_frequency:
                break
            self._mapping[category] = idx
            idx += 1
            if self._support_reverse:
                self._reverse_mapping.append(category)
        self._freq = dict(self._freq[: idx - 1])

    def reverse(self, class_id: int) -> Any:
        """The category of ``class_id``.

        Raises:
          ValueError: the vocabulary was made with ``support_reverse=False``.
        """
        if not self._support_reverse:
            raise ValueError(
                "This vocabulary wasn't initialized with support_reverse to support reverse() "
                "function."
            )
        return self._reverse_mapping[class_id]


class ByteProcessor:
    """TF 1.15's ``ByteProcessor``: each document as its UTF-8 bytes, padded with 0."""

    def __init__(self, max_document_length: int):
        self.max_document_length = max_document_length

    def fit(self, x: Any) -> None:
        """Nothing to learn."""

    def fit_transform(self, x: Iterable[Any]) -> Iterator[np.ndarray]:
        """``transform(x)``."""
        return self.transform(x)

    def reverse(self, x: Iterable[np.ndarray]) -> Iterator[str]:
        """The documents back as strings ('' where the bytes are not UTF-8)."""
        for data in x:
            document = np.trim_zeros(data.astype(np.int8), trim="b").tobytes()
            try:
                yield document.decode("utf-8")
            except UnicodeDecodeError:
                yield ""

    def transform(self, x: Iterable[Any]) -> Iterator[np.ndarray]:
        """Yields each document's first ``max_document_length`` bytes, padded with 0."""
        for document in x:
            if isinstance(document, str):
                document = document.encode("utf-8")
            buff = np.frombuffer(memoryview(document)[: self.max_document_length], dtype=np.uint8)
            yield np.pad(buff, (0, self.max_document_length - len(buff)), "constant")


class VocabularyProcessor:
    """TF 1.15's ``VocabularyProcessor``: documents to fixed-length sequences of word ids.

    Args:
      max_document_length: every document becomes this many ids (cut, or padded with 0).
      min_frequency: keep only the words seen more often than this (0: all).
      vocabulary: a ``CategoricalVocabulary`` to start from.
      tokenizer_fn: a generator of token lists from an iterable of strings (default
        :func:`tokenizer`).

    Example:

        processor = VocabularyProcessor(max_document_length=56)
        x = np.array(list(processor.fit_transform(sentences)))
        processor.save(os.path.join(out_dir, "vocab"))
    """

    def __init__(
        self,
        max_document_length: int,
        min_frequency: int = 0,
        vocabulary: Optional[CategoricalVocabulary] = None,
        tokenizer_fn: Optional[Callable[[Iterable[str]], Iterator[list[str]]]] = None,
    ):
        self.max_document_length = max_document_length
        self.min_frequency = min_frequency
        self.vocabulary_ = vocabulary if vocabulary else CategoricalVocabulary()
        self._tokenizer = tokenizer_fn if tokenizer_fn else tokenizer

    def fit(self, raw_documents: Iterable[str], unused_y: Any = None) -> VocabularyProcessor:
        """Learns the vocabulary of ``raw_documents`` (then frozen); returns ``self``."""
        for tokens in self._tokenizer(raw_documents):
            for token in tokens:
                self.vocabulary_.add(token)
        if self.min_frequency > 0:
            self.vocabulary_.trim(self.min_frequency)
        self.vocabulary_.freeze()
        return self

    def fit_transform(self, raw_documents: Iterable[str], unused_y: Any = None) -> Iterator:
        """``fit`` then ``transform``: yields each document's ids."""
        self.fit(raw_documents)
        return self.transform(raw_documents)

    def transform(self, raw_documents: Iterable[str]) -> Iterator[np.ndarray]:
        """Yields each document's ``max_document_length`` int64 ids (0: unknown or padding)."""
        for tokens in self._tokenizer(raw_documents):
            word_ids = np.zeros(self.max_document_length, np.int64)
            for idx, token in enumerate(tokens):
                if idx >= self.max_document_length:
                    break
                word_ids[idx] = self.vocabulary_.get(token)
            yield word_ids

    def reverse(self, documents: Iterable[Iterable[int]]) -> Iterator[str]:
        """Yields each id sequence as its words joined by spaces."""
        for item in documents:
            yield " ".join(self.vocabulary_.reverse(class_id) for class_id in item)

    def save(self, filename: str) -> None:
        """Pickles the processor to ``filename`` (any ``tf.io.gfile`` path)."""
        with tf.io.gfile.GFile(filename, "wb") as f:
            f.write(pickle.dumps(self))

    @classmethod
    def restore(cls, filename: str) -> VocabularyProcessor:
        """The processor ``save`` wrote to ``filename``."""
        with tf.io.gfile.GFile(filename, "rb") as f:
            return pickle.loads(f.read())
