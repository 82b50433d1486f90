"""Worker processes for the scale-out tests: each runs store_worker.py on the test's database and
is driven through its stdin and stdout (see that script for the commands)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["SCRIPT", "WorkerProcess", "worker_processes"]

SCRIPT = Path(__file__).with_name("store_worker.py")
ANSWER_TIMEOUT_S = 15.0


class WorkerProcess:
    """One store_worker.py process. Answers and notices (``woken``, ``missed``) are read by a
    thread into two queues, so a test can wait for either with a timeout."""

    def __init__(self, url: str) -> None:
        # Open for the process's lifetime; closed by close().
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, str(SCRIPT), url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
        )
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notices: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        assert self.answer() == {"ready": True}

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            is_notice = "woken" in message or "missed" in message
            (self.notices if is_notice else self.answers).put(message)

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-3000:]

    def send(self, op: str, **fields: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        try:
            return self.answers.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"worker {self.pid} did not answer within {timeout} s; its stderr:\n"
                + self.stderr()
            ) from None

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        self.send(op, **fields)
        return self.answer()

    def notice(self, timeout: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        try:
            return self.notices.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"worker {self.pid} reported nothing within {timeout} s") from None

    def freeze(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)

    def close(self) -> None:
        if self.process.poll() is None:
            self.thaw()
            try:
                self.send("exit")
                self.process.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.kill()
        assert self.process.stdin is not None and self.process.stdout is not None
        with contextlib.suppress(BrokenPipeError):  # it had ended with input unread
            self.process.stdin.close()
        self._reader.join(timeout=10)
        self.process.stdout.close()
        self._stderr.close()


@contextmanager
def worker_processes(url: str) -> Iterator[Callable[[], WorkerProcess]]:
    """Starts worker processes on the database at `url`; all are ended on leaving."""
    started: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        worker = WorkerProcess(url)
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.close()
