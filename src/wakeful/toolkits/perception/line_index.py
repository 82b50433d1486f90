"""Where lines start in a big file, found without reading more of it than needed.

Line numbers in a file are only known by counting newlines from its start. For a small file that
is quick; for a 1 GB log it is not, so the scan keeps checkpoints (the byte where a line starts,
about one per MiB) and remembers them per file version (device, inode, size, mtime). A second
read further down the same file starts from the nearest checkpoint. Reading from the end
(`lines_before_end`) scans backwards and costs only what it reads, however big the file is.

Lines end at b"\\n"; a final line without one still counts. All functions here block: call
them through `anyio.to_thread`.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from io import BufferedReader

CHUNK_BYTES = 1 << 20
SMALL_FILE_BYTES = 4 << 20
"""Files up to this size have their lines counted on every read (a few milliseconds)."""
_CACHED_FILES = 32


@dataclass
class LineIndex:
    """Known line starts of one version of a file: sorted (line number, byte) pairs, 0-based."""

    size: int
    lines: list[int] = field(default_factory=lambda: [0])
    starts: list[int] = field(default_factory=lambda: [0])
    total_lines: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def nearest_before(self, line: int) -> tuple[int, int]:
        at = bisect.bisect_right(self.lines, line) - 1
        return self.lines[at], self.starts[at]

    def remember(self, line: int, start: int) -> None:
        at = bisect.bisect_left(self.lines, line)
        if at < len(self.lines) and self.lines[at] == line:
            return
        self.lines.insert(at, line)
        self.starts.insert(at, start)


class _IndexCache:
    def __init__(self, max_files: int) -> None:
        self._max = max_files
        self._items: OrderedDict[tuple[int, int, int, int], LineIndex] = OrderedDict()
        self._lock = threading.Lock()

    def for_file(self, stat: os.stat_result) -> LineIndex:
        key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            found = self._items.get(key)
            if found is None:
                found = self._items[key] = LineIndex(size=stat.st_size)
                while len(self._items) > self._max:
                    self._items.popitem(last=False)
            else:
                self._items.move_to_end(key)
            return found


_CACHE = _IndexCache(_CACHED_FILES)


def index_for(file: BufferedReader) -> LineIndex:
    """The shared index of this version of the open file."""
    return _CACHE.for_file(os.fstat(file.fileno()))


def count_lines(file: BufferedReader, index: LineIndex) -> int:
    """All lines of the file (reads to the end from the last checkpoint), remembered."""
    if index.total_lines is None:
        locate_line(file, index, index.size + 1)
    assert index.total_lines is not None
    return index.total_lines


def locate_line(file: BufferedReader, index: LineIndex, line: int) -> int | None:
    """The byte where 0-based `line` starts, or None if the file has no such line.

    Reaching the end of the file records its line count in the index.
    """
    with index.lock:
        known_line, position = index.nearest_before(line)
        if known_line == line:
            return position
        if index.total_lines is not None and line >= index.total_lines:
            return None
        file.seek(position)
        current = known_line
        line_start = position  # where the line `current` starts
        buffer = bytearray(CHUNK_BYTES)
        while read := file.readinto(buffer):
            newlines = buffer.count(b"\n", 0, read)
            if current + newlines >= line:
                found = position + _after_nth_newline(buffer, read, line - current)
                if found < index.size:
                    index.remember(line, found)
                    return found
                # The target starts after the final newline: that line does not exist.
                index.total_lines = line
                return None
            if newlines:
                current += newlines
                line_start = position + buffer.rindex(b"\n", 0, read) + 1
                index.remember(current, line_start)
            position += read
        # At the end: `current` newlines, and one more line if text follows the last of them.
        index.total_lines = current + (1 if line_start < index.size else 0)
        return None


def _after_nth_newline(buffer: bytearray, end: int, nth: int) -> int:
    """The offset just after the `nth` (1-based) newline in buffer[:end], which must exist.

    Counting whole 64 KiB blocks first keeps the Python-level loop to one block.
    """
    block = 64 * 1024
    start = 0
    while True:
        in_block = buffer.count(b"\n", start, min(start + block, end))
        if in_block >= nth:
            break
        nth -= in_block
        start += block
    found = start
    for _ in range(nth):
        found = buffer.index(b"\n", found, end) + 1
    return found


def lines_before_end(file: BufferedReader, size: int, count: int) -> tuple[int, int | None]:
    """Where the line `count` lines before the end starts, scanning backwards.

    Returns (byte, total): total is the file's line count when the scan reached the start of
    the file (then byte is 0 or the start found), else None. A final line without a newline
    counts as a line.
    """
    if size == 0:
        return 0, 0
    file.seek(size - 1)
    ends_with_newline = file.read(1) == b"\n"
    end = size - 1 if ends_with_newline else size
    # Lines that start inside [0, end) are separated by the newlines in it.
    needed = count - 1  # newlines to pass, counting back from the last line
    seen = 0
    position = end
    while position > 0:
        start = max(0, position - CHUNK_BYTES)
        file.seek(start)
        chunk = file.read(position - start)
        newlines = chunk.count(b"\n")
        if seen + newlines > needed:
            at = len(chunk)
            for _ in range(needed - seen + 1):
                at = chunk.rindex(b"\n", 0, at)
            return start + at + 1, None
        seen += newlines
        position = start
    return 0, seen + 1
