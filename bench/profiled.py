"""Run a module under cProfile switched on and off by signals (``bench.compare --profile``).

``python -m bench.profiled OUT.prof gateway run`` runs ``python -m gateway run``; SIGUSR1
starts profiling the event loop's thread (its CPU time, not wall time), SIGUSR2 stops it and writes the statistics to
OUT.prof (``python -m pstats OUT.prof``). Start-up and idle time stay out of the profile.
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
    profiler = cProfile.Profile(time.thread_time)

    def start(signum: int, frame: FrameType | None) -> None:
        profiler.enable()

    def stop(signum: int, frame: FrameType | None) -> None:
        profiler.disable()
        profiler.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
