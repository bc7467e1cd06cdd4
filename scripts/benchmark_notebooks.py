"""Time the execution of every chapter notebook, as nbval runs it (a fresh kernel each).

    ./course bench

Writes benchmarks/notebooks.json and prints a table. Targets (COURSE_GUIDE §8): each
notebook ≤ 90 s and the whole course ≤ 8 minutes on a 2-core CPU. Notebooks are executed
in a temporary copy, so the stored outputs are left alone.
"""

import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from execute_notebooks import ROOT, chapter_notebooks, execute  # noqa: E402

PER_NOTEBOOK_TARGET = 90.0
COURSE_TARGET = 480.0


def main() -> None:
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "chapters"
        shutil.copytree(ROOT / "chapters", copy)
        shutil.copytree(ROOT / "benchmarks", Path(scratch) / "benchmarks")  # chapters read ../benchmarks/*.json
        for original in chapter_notebooks():
            notebook = copy / original.relative_to(ROOT / "chapters")
            start = time.perf_counter()
            execute(notebook)
            results[str(original.relative_to(ROOT))] = round(time.perf_counter() - start, 1)
    total = round(sum(results.values()), 1)
    for name, seconds in results.items():
        flag = "" if seconds <= PER_NOTEBOOK_TARGET else f"  over the {PER_NOTEBOOK_TARGET:.0f} s target"
        print(f"{name:45s} {seconds:7.1f} s{flag}")
    print(f"{'total':45s} {total:7.1f} s (target {COURSE_TARGET:.0f} s)")
    report = {
        "seconds": results,
        "total_seconds": total,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__, "processor": platform.processor()},
    }
    out = ROOT / "benchmarks" / "notebooks.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
