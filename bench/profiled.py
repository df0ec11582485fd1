"""Run a module under cProfile switched on and off by signals (``bench.compare --profile``).

``python -m bench.profiled OUT gateway run`` runs ``python -m gateway run``; SIGUSR1 starts
profiling the event loop's thread (its CPU time, not wall time), SIGUSR2 stops it and writes
the statistics to OUT-1.prof, then OUT-2.prof, ... (``python -m pstats OUT-1.prof``).
Start-up and idle time stay out of the profile.
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
import time
from types import FrameType


def main() -> None:
    out, module, *args = sys.argv[1:]
    # CPU time of the profiled (event loop) thread: on a busy machine wall-clock time would
    # blame whatever ran when the process was descheduled.
    profilers: list[cProfile.Profile] = []

    def start(signum: int, frame: FrameType | None) -> None:
        profilers.append(cProfile.Profile(time.thread_time))
        profilers[-1].enable()

    def stop(signum: int, frame: FrameType | None) -> None:
        profilers[-1].disable()
        profilers[-1].dump_stats(f"{out}-{len(profilers)}.prof")

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
