"""Summarise a py-spy profile in raw (collapsed stack) format: where the CPU went.

``python -m bench.stacks FILE [--top 25]`` prints, as a share of all samples, the functions
that were running (self) and the functions on the stack (inclusive, counted once per
sample), plus the split by thread. ``bench.compare --py-spy PREFIX`` records such files.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_SITE = re.compile(r"\s*\((?:.*/site-packages/|.*/lib/python3\.\d+/|.*/issue-\d+/)?([^)]*)\)")


def frame_name(frame: str) -> str:
    """``func (path/to/file.py:12)`` -> ``func (file path below site-packages:12)``."""
    return _SITE.sub(lambda m: f" ({m.group(1)})", frame).strip()


def summarise(path: Path, top: int) -> str:
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame_name(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        thread = frames[0] if frames[0].startswith(("thread", "process")) else "?"
        threads[thread] += count
        code = [f for f in frames if not f.startswith(("thread", "process"))]
        if code:
            self_time[code[-1]] += count
        for name in set(code):
            inclusive[name] += count
    if not total:
        return f"{path}: no samples"
    lines = [f"{path}: {total} samples"]
    lines.append("by thread:")
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in threads.most_common()]
    lines.append(f"top {top} on the stack (inclusive):")
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    lines.append(f"top {top} running (self):")
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in self_time.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(summarise(args.file, args.top))


if __name__ == "__main__":
    main()
