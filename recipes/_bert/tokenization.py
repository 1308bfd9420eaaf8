"""WordPiece tokenisation from a BERT ``vocab.txt``, as in google-research/bert.

:class:`BasicTokenizer` cleans the text, splits on whitespace and punctuation, isolates CJK
characters and (``do_lower_case``) lower-cases and strips accents; :class:`WordpieceTokenizer`
splits each word greedily into the longest vocabulary pieces (``##`` marks a continuation) or
``[UNK]``. :class:`FullTokenizer` chains the two and maps tokens to ids.

Example:

    tokenizer = FullTokenizer("uncased_L-12_H-768_A-12/vocab.txt", do_lower_case=True)
    tokenizer.tokenize("Héllo, unaffable!")   # ['hello', ',', 'una', '##ffa', '##ble', '!']
"""

from __future__ import annotations

import collections
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Optional, Union

from tfest_kit._tf import tf

__all__ = [
    "BasicTokenizer",
    "FullTokenizer",
    "WordpieceTokenizer",
    "check_case_matches_checkpoint",
    "convert_to_unicode",
    "load_vocab",
    "whitespace_tokenize",
]

UNK = "[UNK]"


def convert_to_unicode(text: Union[str, bytes]) -> str:
    """Returns ``text`` as ``str``, decoding UTF-8 bytes (invalid bytes are dropped).

    Raises:
      TypeError: if ``text`` is neither ``str`` nor ``bytes``.
    """
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise TypeError(f"`text` must be str or bytes. Got: {type(text).__name__}")


def load_vocab(vocab_file: str) -> collections.OrderedDict:
    """Reads ``vocab.txt`` (one token per line) into ``{token: id}`` in file order.

    Raises:
      ValueError: if the file is missing or holds no token.
    """
    if not tf.io.gfile.exists(vocab_file):
        raise ValueError(
            f"`vocab_file` does not exist. Got: {vocab_file!r}. Pass the vocab.txt that came "
            "with the BERT checkpoint (or leave the data flags unset for the built-in task)."
        )
    vocab = collections.OrderedDict()
    with tf.io.gfile.GFile(vocab_file, "r") as reader:
        for line in reader:
            token = convert_to_unicode(line).strip()
            if token and token not in vocab:
                vocab[token] = len(vocab)
    if not vocab:
        raise ValueError(f"`vocab_file` holds no token. Got: {vocab_file!r}")
    return vocab


def whitespace_tokenize(text: str) -> list[str]:
    """Splits on runs of whitespace, ignoring leading and trailing whitespace."""
    return text.strip().split()


def check_case_matches_checkpoint(do_lower_case: bool, init_checkpoint: Optional[str]) -> None:
    """Raises if ``do_lower_case`` contradicts a released checkpoint's name (cased / uncased).

    Only the released names (``uncased_L-12_H-768_A-12`` …) are recognised; anything else
    passes, as in the original ``validate_case_matches_checkpoint``.

    Raises:
      ValueError: e.g. ``do_lower_case=False`` with an ``uncased_…`` checkpoint.
    """
    if not init_checkpoint:
        return
    match = re.search(r"(?:^|/)([A-Za-z0-9_-]+)/bert_model\.ckpt", init_checkpoint)
    if match is None:
        return
    name = match.group(1)
    lower = {"uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12", "multilingual_L-12_H-768_A-12"}
    lower.add("chinese_L-12_H-768_A-12")
    cased = {"cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16", "multi_cased_L-12_H-768_A-12"}
    if name in lower and not do_lower_case:
        wanted, flag = "True", "--do_lower_case"
    elif name in cased and do_lower_case:
        wanted, flag = "False", "--nodo_lower_case"
    else:
        return
    raise ValueError(
        f"`do_lower_case` must be {wanted} for the {name} checkpoint. Got: "
        f"do_lower_case={do_lower_case}. Pass {flag}."
    )


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    # \t \n \r count as whitespace, not control, as in the original.
    if char in "\t\n\r":
        return False
    return unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    # ASCII non-letter/number symbols ($, ^, `) count as punctuation although Unicode does not
    # class them as such; BERT's vocabularies were built that way.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


class BasicTokenizer:
    """Punctuation splitting, CJK isolation and optional lower-casing / accent stripping.

    Args:
      do_lower_case: lower-case and strip accents (for ``uncased`` vocabularies).

    Example:

        BasicTokenizer().tokenize("Héllo, World!")  # ['hello', ',', 'world', '!']
    """

    def __init__(self, do_lower_case: bool = True) -> None:
        self.do_lower_case = bool(do_lower_case)

    def tokenize(self, text: Union[str, bytes]) -> list[str]:
        """Returns the basic tokens of ``text``."""
        text = self._tokenize_chinese_chars(self._clean_text(convert_to_unicode(text)))
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = self._strip_accents(token.lower())
            split_tokens.extend(self._split_on_punc(token))
        return whitespace_tokenize(" ".join(split_tokens))

    @staticmethod
    def _strip_accents(text: str) -> str:
        return "".join(
            c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
        )

    @staticmethod
    def _split_on_punc(text: str) -> list[str]:
        pieces: list[list[str]] = []
        start_new_word = True
        for char in text:
            if _is_punctuation(char):
                pieces.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    pieces.append([])
                start_new_word = False
                pieces[-1].append(char)
        return ["".join(p) for p in pieces]

    @staticmethod
    def _tokenize_chinese_chars(text: str) -> str:
        return "".join(f" {c} " if _is_chinese_char(ord(c)) else c for c in text)

    @staticmethod
    def _clean_text(text: str) -> str:
        output = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or _is_control(char):
                continue
            output.append(" " if _is_whitespace(char) else char)
        return "".join(output)


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece over a vocabulary.

    Args:
      vocab: ``{token: id}`` (or any container of tokens); continuations start with ``##``.
      unk_token: token for a word that cannot be pieced together.
      max_input_chars_per_word: longer words become ``unk_token``.

    Example:

        WordpieceTokenizer({"un": 0, "##aff": 1, "##able": 2}).tokenize("unaffable")
        # ['un', '##aff', '##able']
    """

    def __init__(
        self, vocab: Mapping, unk_token: str = UNK, max_input_chars_per_word: int = 200
    ) -> None:
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text: str) -> list[str]:
        """Returns the word pieces of already basic-tokenised, whitespace-separated ``text``."""
        output = []
        for token in whitespace_tokenize(convert_to_unicode(text)):
            if len(token) > self.max_input_chars_per_word:
                output.append(self.unk_token)
                continue
            pieces = self._pieces(token)
            output.extend(pieces if pieces is not None else [self.unk_token])
        return output

    def _pieces(self, token: str) -> Optional[list[str]]:
        pieces = []
        start = 0
        while start < len(token):
            end = len(token)
            piece = None
            while start < end:
                candidate = token[start:end] if start == 0 else "##" + token[start:end]
                if candidate in self.vocab:
                    piece = candidate
                    break
                end -= 1
            if piece is None:
                return None
            pieces.append(piece)
            start = end
        return pieces


class FullTokenizer:
    """:class:`BasicTokenizer` then :class:`WordpieceTokenizer`, with id conversion.

    Args:
      vocab_file: path of ``vocab.txt``.
      do_lower_case: as for :class:`BasicTokenizer`; must match the checkpoint.

    Raises:
      ValueError: if ``vocab_file`` is missing or empty, or has no ``[UNK]`` token.

    Example:

        tokenizer = FullTokenizer(vocab_file)
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("a sentence"))
    """

    def __init__(self, vocab_file: str, do_lower_case: bool = True) -> None:
        self.vocab = load_vocab(vocab_file)
        if UNK not in self.vocab:
            raise ValueError(f"`vocab_file` has no {UNK} token. Got: {vocab_file!r}")
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

    def tokenize(self, text: Union[str, bytes]) -> list[str]:
        """Returns the word pieces of ``text``."""
        return [
            piece
            for token in self.basic_tokenizer.tokenize(text)
            for piece in self.wordpiece_tokenizer.tokenize(token)
        ]

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        """Maps tokens to ids; unknown tokens map to the ``[UNK]`` id."""
        unk = self.vocab[UNK]
        return [self.vocab.get(t, unk) for t in tokens]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """Maps ids back to tokens."""
        return [self.inv_vocab[int(i)] for i in ids]
