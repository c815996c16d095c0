"""The last lines of a job's stdout or stderr, kept while the stream is read: at most LOG_LINES lines of at most
LINE_BYTES each are ever held, however much the job prints (GC keeps the last 500 lines)."""

from __future__ import annotations

import subprocess
import threading
from collections import deque
from typing import BinaryIO

LOG_LINES = 500  # GC keeps the last 500 lines of a job's stdout and stderr
LINE_BYTES = 4096  # of one line, kept (a longer line is cut; the report quotes far less)
CHUNK_BYTES = 1 << 16
JOIN_S = 10.0  # the wait for a stream's end once its process is gone (a descendant may hold it open)


class TailReader(threading.Thread):
    """Reads `stream` to its end in a thread of its own, keeping only its last lines."""

    def __init__(self, stream: BinaryIO):
        super().__init__(daemon=True)
        self.stream = stream
        self.kept: deque[bytes] = deque(maxlen=LOG_LINES)
        self.start()

    def run(self) -> None:
        line = b""
        try:
            while chunk := self.stream.read1(CHUNK_BYTES):
                *ended, rest = chunk.split(b"\n")
                for part in ended:
                    self.kept.append((line + part[: LINE_BYTES - len(line)]).removesuffix(b"\r"))
                    line = b""
                line += rest[: LINE_BYTES - len(line)]
        except (OSError, ValueError):  # closed by the launcher after JOIN_S: what was read is kept
            pass
        if line:
            self.kept.append(line)

    def lines(self) -> list[str]:
        """The last lines read (all of them once the stream ended, or after JOIN_S)."""
        self.join(JOIN_S)
        return [line.decode("utf-8", "replace") for line in list(self.kept)]


def read_tails(process: subprocess.Popen) -> tuple[TailReader, TailReader]:
    """Readers of the last lines of `process`'s stdout and stderr (both subprocess.PIPE), started now."""
    return TailReader(process.stdout), TailReader(process.stderr)
