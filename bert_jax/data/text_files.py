"""Text files: globs resolved to existing, non-empty files; UTF-8 read with errors naming the
file and byte offset. Every data path (vocabulary, pretraining, classification) starts here."""

from __future__ import annotations

import glob
import os
from typing import Iterator, Optional, Sequence, Union

from bert_jax.errors import BertJaxError


def resolve_files(files: Union[str, Sequence[str]]) -> list[str]:
    """A glob pattern, a path or a list of either → sorted existing, non-empty text files."""
    patterns = [files] if isinstance(files, str) else list(files)
    if not patterns:
        raise BertJaxError("files: no input files given")
    paths = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matched = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
            if not matched:
                raise BertJaxError(f"{pattern}: no file matches this pattern")
            paths.extend(matched)
        elif os.path.isdir(pattern):
            raise BertJaxError(f"{pattern}: is a directory; give a file or a glob like "
                               f"'{os.path.join(pattern, '*.txt')}'")
        elif not os.path.isfile(pattern):
            raise BertJaxError(f"{pattern}: file not found")
        else:
            paths.append(pattern)
    for path in paths:
        if os.path.getsize(path) == 0:
            raise BertJaxError(f"{path}: file is empty")
    return list(dict.fromkeys(paths))  # a file matched by two patterns is read once


def read_utf8(path: str) -> str:
    """The file decoded; non-UTF-8 bytes are refused naming the first one and its offset."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8-sig")  # tolerate a byte-order mark
    except UnicodeDecodeError as e:
        raise BertJaxError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                           f"{e.start})") from None


def read_text(path: str) -> str:
    """The file's text; refuses non-UTF-8 bytes and files with nothing but whitespace."""
    text = read_utf8(path)
    if not text.strip():
        raise BertJaxError(f"{path}: file contains no text")
    return text


_BOM = b"\xef\xbb\xbf"
_BLOCK = 1 << 22  # bytes decoded at a time by check_text
_LINE_BLOCK = 1 << 20  # bytes read at a time by line_blocks


def line_blocks(f, path: str, cap: Optional[int], what: str = "line") -> Iterator[bytes]:
    """The lines of binary file `f` (each with its "\\n"), read a block at a time so that a
    line longer than `cap` bytes is refused as soon as it passes the cap, naming the file and
    line, instead of being read whole (a JSON line of gigabytes would need several times that
    to parse). `what` says what such a line is, for the message; cap None: no cap."""
    number = 0
    while True:
        parts, size = [], 0
        while True:
            part = f.readline(_LINE_BLOCK)
            if not part:
                break
            parts.append(part)
            size += len(part)
            if part.endswith(b"\n"):
                size -= 1
                break
            if cap is not None and size > cap:
                break
        if not parts:
            return
        number += 1
        if cap is not None and size > cap:
            raise BertJaxError(f"{path}:{number}: line longer than {_size(cap)}; a {what} this "
                               f"long is refused, not read whole")
        yield parts[0] if len(parts) == 1 else b"".join(parts)


def decode(raw: bytes, path: str, offset: int) -> str:
    """`raw` (bytes at `offset` of `path`) as UTF-8; refused naming the byte and its offset."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BertJaxError(f"{path}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                           f"{offset + e.start})") from None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n:,} bytes"


def check_text(path: str) -> None:
    """read_text's checks (UTF-8, not only whitespace) a block at a time, for files that are
    only handed on (to the tokenizer trainer): memory stays at one block, however large."""
    offset, carry, has_text = 0, b"", False
    with open(path, "rb") as f:
        while True:
            block = f.read(_BLOCK)
            data = carry + block
            if offset == 0 and data.startswith(_BOM):
                data, offset = data[len(_BOM):], len(_BOM)
            try:
                text, carry = data.decode("utf-8"), b""
            except UnicodeDecodeError as e:
                if not block or e.reason != "unexpected end of data":  # not a split character
                    raise BertJaxError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at "
                                       f"offset {offset + e.start})") from None
                text, carry = data[:e.start].decode("utf-8"), data[e.start:]
            offset += len(data) - len(carry)
            has_text = has_text or bool(text.strip())
            if not block:
                break
    if not has_text:
        raise BertJaxError(f"{path}: file contains no text")

