"""Run a chapter's code from another page.

Each chapter's evidence (its records read in full, the checks behind its sentences) is a page of
its own, so that the lesson stays short. The evidence needs the chapter's variables: its trained
models and its tables. ``run_chapter`` runs the chapter notebook's code cells, in order and showing
nothing, in the namespace it is given. The same seeds give the same models as the chapter's own
run, so the evidence page reads the very run the lesson shows.
"""

import json
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.utils.capture import capture_output

__all__ = ["run_chapter"]


def run_chapter(path, namespace):
    """Run the code cells of the notebook at ``path`` in ``namespace``, showing nothing.

    Cells tagged ``raises-exception`` (a chapter's deliberate errors) may raise; any other
    error stops the run with the cell's number. Returns the number of cells run.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"run_chapter: no notebook at path={str(path)!r}")
    cells = json.loads(path.read_text())["cells"]
    ran = 0
    with capture_output():  # prints, figures and glued values stay on the chapter's page
        for number, cell in enumerate(cells):
            if cell["cell_type"] != "code":
                continue
            code = compile("".join(cell["source"]), f"{path.name}, cell {number}", "exec")
            try:
                exec(code, namespace)
            except Exception as error:
                if "raises-exception" not in cell.get("metadata", {}).get("tags", []):
                    raise RuntimeError(f"{path.name}: cell {number} failed: {error!r}") from error
            ran += 1
            plt.close("all")
    return ran
