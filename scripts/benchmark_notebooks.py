"""Time the execution of every chapter notebook, as nbval runs it (a fresh kernel each).

    ./course bench

Writes benchmarks/notebooks.json and prints a table. Targets: each notebook ≤ 60 s (aim
45) and the whole course ≤ 6 minutes on a 2-core CPU with one thread. Notebooks are
executed in a temporary copy, so the stored outputs are left alone; a notebook that fails
is timed up to its failure and marked, and the others still run. Run it on a quiet machine:
the numbers are wall times.
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
from nbclient.exceptions import CellExecutionError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from execute_notebooks import ROOT, chapter_notebooks, execute  # noqa: E402

PER_NOTEBOOK_TARGET = 60.0
COURSE_TARGET = 360.0


def main() -> None:
    results, failed = {}, []
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "chapters"
        shutil.copytree(ROOT / "chapters", copy)
        shutil.copytree(ROOT / "benchmarks", Path(scratch) / "benchmarks")  # chapters read ../benchmarks/*.json
        for original in chapter_notebooks():
            notebook = copy / original.relative_to(ROOT / "chapters")
            name = str(original.relative_to(ROOT))
            start = time.perf_counter()
            try:
                execute(notebook)
            except CellExecutionError as error:
                failed.append(name)
                print(f"{name} FAILED: {str(error).strip().splitlines()[-1]}", flush=True)
            results[name] = round(time.perf_counter() - start, 1)
    total = round(sum(results.values()), 1)
    for name, seconds in results.items():
        flag = "" if seconds <= PER_NOTEBOOK_TARGET else f"  over the {PER_NOTEBOOK_TARGET:.0f} s target"
        flag += "  FAILED (timed up to the failure)" if name in failed else ""
        print(f"{name:45s} {seconds:7.1f} s{flag}")
    print(f"{'total':45s} {total:7.1f} s (target {COURSE_TARGET:.0f} s)")
    report = {
        "seconds": results,
        "total_seconds": total,
        "failed": failed,
        "threads_per_notebook": 1,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "processor": platform.processor(),
        },
    }
    out = ROOT / "benchmarks" / "notebooks.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
