"""Whether a TFRecord shard ends where its last record does: truncated shards, named early.

TensorFlow finds a shard cut short (an interrupted copy or write) only when training reaches
its end, and its message ("truncated record at 6039") does not name the file (shown by
test_official_tfrecord_dataset_finds_a_cut_shard_only_at_its_end_without_its_name). A TFRecord is a
sequence of ``length (uint64) | masked CRC-32C of length (uint32) | data | masked CRC-32C of
data (uint32)``, so the last bytes of a file show whether its last record is whole.
"""

from __future__ import annotations

import struct
from typing import Optional

import numpy as np

from tfest_kit._input_common import DataError
from tfest_kit._tf import tf2

__all__ = ["check_complete", "truncation"]


# How much of a shard's end is read to find its last record: a small read that finds the
# usual small records, then a larger one. A shard no larger is followed from its start.
_TAIL_BYTES = (64 * 1024, 1024 * 1024)


def _crc32c_table() -> np.ndarray:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return np.asarray(table, dtype=np.uint32)


# TensorFlow has no public CRC-32C; only 8-byte headers are checksummed here, in NumPy.
_CRC32C_TABLE = _crc32c_table()


def _lengths(tail: bytes):
    """(offset, value) arrays of the little-endian uint64 at every offset a header could start."""
    for shift in range(8):
        count = (len(tail) - 12 - shift) // 8 + 1
        if count > 0:
            values = np.frombuffer(tail, "<u8", count=count, offset=shift).astype(np.int64)
            yield shift + 8 * np.arange(count, dtype=np.int64), values


def _is_header(tail: bytes, at: int) -> bool:
    stored = struct.unpack("<I", tail[at + 8 : at + 12])[0]
    data = np.frombuffer(tail, dtype=np.uint8, count=at + 8)
    return stored == int(_masked_crc32c_at(data, np.array([at]))[0])


def _last_record_ends_file(tail: bytes) -> bool:
    """Whether a record header in ``tail`` gives a length that ends it with ``tail`` (fast)."""
    for offsets, lengths in _lengths(tail):
        for at in offsets[lengths == len(tail) - 16 - offsets]:
            if _is_header(tail, int(at)):
                return True
    return False


def _masked_crc32c_at(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The masked CRC-32C TFRecord stores after each length, of the 8 bytes at each offset."""
    crc = np.full(len(offsets), 0xFFFFFFFF, dtype=np.uint32)
    for i in range(8):
        crc = _CRC32C_TABLE[(crc ^ data[offsets + i]) & 0xFF] ^ (crc >> 8)
    crc ^= np.uint32(0xFFFFFFFF)
    return ((crc >> 15) | (crc << 17)) + np.uint32(0xA282EAD8)  # uint32 arithmetic wraps


def _record_headers(tail: bytes) -> list:
    """Offsets in ``tail`` holding a TFRecord header: 8 length bytes and their checksum."""
    data = np.frombuffer(tail, dtype=np.uint8)
    found = []
    for offsets, lengths in _lengths(tail):
        # Records are far shorter than 2**40 bytes; most data bytes fail this at once. Data of
        # small integers (token ids, zeros) does not, so the checksums are computed together:
        # one by one in Python they took over a second per MiB.
        offsets = offsets[(lengths >= 0) & (lengths < 2**40)]
        stored = data[offsets + 8].astype(np.uint32)
        for i in (1, 2, 3):
            stored |= data[offsets + 8 + i].astype(np.uint32) << np.uint32(8 * i)
        found.extend(offsets[stored == _masked_crc32c_at(data, offsets)].tolist())
    return sorted(found)


def _chain(tail: bytes, start: int, seen: set) -> tuple[int, int, Optional[int]]:
    """Follows records from ``start``: (headers checked, where it stopped, what it needed).

    Needed is None when the records end exactly at the end of ``tail``, the full size of a
    record that runs past it (12 for a header cut short), or -1 for bytes that are not a
    header. ``seen`` collects the offsets passed, so a later start on the same chain is skipped.
    """
    at, headers = start, 0
    while at < len(tail):
        seen.add(at)
        if len(tail) - at < 12:
            return headers, at, 12
        if not _is_header(tail, at):
            return headers, at, -1
        headers += 1
        length = struct.unpack("<Q", tail[at : at + 8])[0]
        if at + 16 + length > len(tail):
            return headers, at, 16 + length
        at += 16 + length
    return headers, at, None


def truncation(path: str) -> Optional[str]:
    """What is wrong with the end of an uncompressed TFRecord file, or None if nothing seems so.

    The records found in the file's last bytes (``_TAIL_BYTES``) must end exactly where the
    file does. A shard no longer than that is followed from its first
    byte. In a longer one the records are found by their checksums, and only a chain of two or
    more checksummed headers counts, so chance matches in the data claim nothing; nor does a
    last record longer than the window.
    """
    with tf2.io.gfile.GFile(path, "rb") as f:
        size = f.size()
        for window in _TAIL_BYTES:
            f.seek(size - min(size, window))
            tail = f.read()
            if _last_record_ends_file(tail):
                return None  # the usual case, found without following the records
            if size <= window:
                break
    whole = len(tail) == size
    base = size - len(tail)
    seen: set[int] = set()
    worst = None  # (headers, where, needed) of the longest chain that did not end well
    for start in [0] if whole else _record_headers(tail):
        if start in seen:
            continue
        headers, at, needed = _chain(tail, start, seen)
        if needed is None:
            return None
        if (whole or headers >= 2) and (worst is None or headers > worst[0]):
            worst = (headers, at, needed)
    if worst is None:
        return None
    _, at, needed = worst
    if needed > 0:
        return (
            f"it is truncated: the record at byte {base + at:,} needs {needed:,} bytes, but the "
            f"file ends {size - base - at:,} bytes after its start"
        )
    if whole and at == 0:
        return (
            "it does not start with a TFRecord header (if it was written with compression, "
            "pass compression='GZIP' or 'ZLIB')"
        )
    return f"it is corrupt: the bytes at {base + at:,} are not a record header (bad checksum)"


def check_complete(files: list[str], compression: Optional[str]) -> None:
    """DataError naming the first local, uncompressed shard whose last record is cut short."""
    if compression:
        return  # a compressed stream's end says nothing about its records
    for path in files:
        if "://" in path:
            continue  # one remote read per shard would make building the input_fn slow
        problem = truncation(path)
        if problem:
            raise DataError(
                f"{path}: {problem}. An interrupted copy or write leaves a file like this; "
                "copy or write it again, or leave it out of `file_pattern`."
            )
