"""Re-run chapter notebooks in place, each in a fresh kernel, top to bottom.

Run this after changing code that a notebook uses, so the stored outputs (what the website
shows and what `pytest --nbval` compares against) are what the code prints now:

    ./course execute                                # every notebook in chapters/
    ./course execute chapters/01_seq2seq.ipynb      # just one

Each notebook runs in its own directory, as nbval and JupyterLab run it, with
ATTNBOOK_QUIET=1 so training prints no progress lines into the stored outputs.
"""

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def chapter_notebooks() -> list[Path]:
    """Every notebook under chapters/, in order, skipping checkpoints."""
    notebooks = sorted((ROOT / "chapters").rglob("*.ipynb"))
    return [nb for nb in notebooks if ".ipynb_checkpoints" not in nb.parts]


def execute(path: Path, timeout: int = 600) -> float:
    """Execute one notebook in place; return the seconds it took."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        coalesce_streams=True,  # one output block per stream, however the kernel flushed it under load
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    nbformat.write(notebook, path)
    return seconds


def main(arguments: list[str]) -> None:
    os.environ["ATTNBOOK_QUIET"] = "1"
    paths = [Path(a).resolve() for a in arguments] or chapter_notebooks()
    for path in paths:
        print(f"executing {path.relative_to(ROOT)} ...", flush=True)
        print(f"  done in {execute(path):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
