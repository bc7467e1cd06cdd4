"""Code that fits the page: ruff is clean and every notebook code line fits the website's
code column (88 characters). Configuration: ruff.toml (notebooks 88, Python files 120)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")
COLUMN = 88


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_is_clean(command):
    result = subprocess.run([str(RUFF), *command, "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, (
        f"ruff {' '.join(command)} found problems (fix: .venv/bin/ruff format . and "
        f".venv/bin/ruff check --fix .):\n{result.stdout}{result.stderr}"
    )


def test_no_notebook_code_line_is_wider_than_the_code_column():
    wide = []
    for path in sorted((ROOT / "chapters").rglob("*.ipynb")):
        for number, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] != "code":
                continue
            for line in "".join(cell["source"]).splitlines():
                if len(line) > COLUMN:
                    wide.append(f"{path.relative_to(ROOT)} cell {number}: {len(line)} characters")
    assert not wide, "\n".join(wide)


def test_no_notebook_glues_one_name_twice():
    """A name glued twice shows the prose whichever value came last: a silent wrong number
    (Chapter 3 once printed a control's interval as input feeding's this way)."""
    twice = []
    for path in sorted((ROOT / "chapters").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        seen = set()
        for cell in json.loads(path.read_text())["cells"]:
            for output in cell.get("outputs", []):
                name = output.get("metadata", {}).get("scrapbook", {}).get("name")
                if name is None:
                    continue
                if name in seen:
                    twice.append(f"{path.relative_to(ROOT)}: {name}")
                seen.add(name)
    assert not twice, "\n".join(twice)


def test_every_named_glue_is_used_by_the_text():
    """A value glued under a literal name and printed nowhere is computed for no reader: the
    sentence that used it was rewritten and the number stayed behind. (Names built in a loop,
    f"..._{arm}", are not checked: a loop glues a whole table, and the text picks from it.)"""
    used = pasted_names()
    unused = []
    for path in chapter_notebooks():
        cells = json.loads(path.read_text())["cells"]
        code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        for name in re.findall(r'\bglue\(\s*"([^"]+)"', code):
            if (path, name) not in used:
                unused.append(f"{path.relative_to(ROOT)}: {name}")
    assert not unused, "glued but printed nowhere (remove the glue):\n" + "\n".join(unused)


def chapter_notebooks():
    return [p for p in sorted((ROOT / "chapters").rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts]


def pasted_names():
    """Every (notebook, name) some text pastes: `name` from its own notebook, `other.ipynb::name`
    from another one (an evidence page and its chapter paste from each other)."""
    pasted = set()
    for path in chapter_notebooks():
        cells = json.loads(path.read_text())["cells"]
        text = "".join("".join(c["source"]) for c in cells if c["cell_type"] != "code")
        for target in re.findall(r"\{glue(?::\w+)?\}`([^`]+)`", text):
            doc, _, name = target.rpartition("::")
            name = name.split(":")[0]
            pasted.add(((path.parent / doc).resolve() if doc else path, name))
    return pasted


def test_every_value_pasted_from_another_page_is_glued_there():
    """A paste from another notebook names a file and a name that exist (the book build would
    only warn about the name)."""
    missing = []
    for path, name in pasted_names():
        if not path.is_file():
            missing.append(f"no notebook {path.relative_to(ROOT)} (pasting {name})")
            continue
        glued = {
            output.get("metadata", {}).get("scrapbook", {}).get("name")
            for cell in json.loads(path.read_text())["cells"]
            for output in cell.get("outputs", [])
        }
        if name not in glued:
            missing.append(f"{path.relative_to(ROOT)} glues no {name}")
    assert not missing, "\n".join(sorted(missing))
