"""A bot under test in its own process: start it, read its CPU time and memory, stop it.

CPU and memory come from /proc (Linux): ``utime + stime`` of the whole process (every
thread, the SQLite writer included), in clock ticks of 10 ms, so measure over enough work.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    return sum(cpu_split(pid))


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU time of the process so far: system time is the kernel's work for
    it (system calls such as fsync, thread wake-ups, sockets)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / _TICK, int(fields[12]) / _TICK  # utime, stime (fields 14, 15)


def main_thread_cpu_seconds(pid: int) -> float:
    """CPU time of the process's main thread alone (the event loop's, for our bots)."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def memory_mib(pid: int, key: str = "VmRSS") -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (the peak) of the process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass(frozen=True, slots=True)
class CpuMark:
    """A reading of a process's CPU times, in seconds."""

    user: float
    system: float
    main_thread: float

    @property
    def total(self) -> float:
        return self.user + self.system


class BotProcess:
    """``python -m <module> [args]`` with its own environment; output goes to a log file."""

    def __init__(self, module: str, *args: str, env: Mapping[str, str], log: Path) -> None:
        self._argv = [sys.executable, "-m", module, *args]
        self._env = dict(env)
        self._log = log
        self._process: asyncio.subprocess.Process | None = None
        self.started_at = 0.0  # time.perf_counter() just before the process was created

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    async def start(self) -> None:
        with self._log.open("ab") as log:
            self.started_at = time.perf_counter()
            self._process = await asyncio.create_subprocess_exec(
                *self._argv, env=self._env, stdout=log, stderr=log, cwd=Path.cwd()
            )

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def mark(self) -> CpuMark:
        user, system = cpu_split(self.pid)
        return CpuMark(user, system, main_thread_cpu_seconds(self.pid))

    def main_thread_cpu(self) -> float:
        return main_thread_cpu_seconds(self.pid)

    def signal(self, signum: int) -> None:
        assert self._process is not None
        self._process.send_signal(signum)

    async def settled_cpu(self, *, quiet: float = 0.005, step: float = 0.2) -> float:
        """CPU time once the process has stopped working (less than ``quiet`` s per step)."""
        before = self.cpu()
        for _ in range(15):
            await asyncio.sleep(step)
            now = self.cpu()
            if now - before < quiet:
                return now
            before = now
        return before

    def exited(self) -> bool:
        return self._process is not None and self._process.returncode is not None

    async def stop(self) -> None:
        if self._process is None or self._process.returncode is not None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self._process.wait(), 15)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            await self._process.wait()


class PySpy:
    """``py-spy record`` on a running process (sampling, all threads, only time on a CPU)."""

    def __init__(self, pid: int, out: Path) -> None:
        self._argv = [
            str(Path(sys.executable).with_name("py-spy")),
            "record",
            "--pid",
            str(pid),
            "--rate",
            "250",
            "--format",
            "raw",
            "--threads",
            "--nonblocking",  # do not pause the bot to sample it
            "--output",
            str(out),
        ]
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *self._argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        await asyncio.sleep(0.5)  # attached before the work starts

    async def stop(self) -> None:
        if self._process is None:
            return
        self._process.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        await self._process.wait()
