"""The repository stands alone: the paths its README and CONTRIBUTING name exist, and no file
points outside the repository."""

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "CONTRIBUTING.md"]
#: Made by the commands, not stored: the virtual environment and the built site.
GENERATED = (".venv", "_build")
#: Words that stand for a name the reader picks (NAME, PATH, NN_name, THE_NOTEBOOK, X).
PLACEHOLDER = re.compile(r"NAME|PATH|NN|THE_NOTEBOOK|\bX\b|_X\b")
EXTENSIONS = (".md", ".py", ".json", ".ipynb", ".yml", ".toml", ".txt", ".cfg", ".ini", ".svg", ".bib")


def named_paths(text: str) -> set[str]:
    """Repository paths a document names: in `code spans`, and at the start of the layout block's lines."""
    candidates = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        candidates.update(span.split())
    for block in re.findall(r"```\n(.*?)```", text, flags=re.S):  # layout blocks: a path starts each line
        for line in block.splitlines():
            if line and not line.startswith((" ", "#", "./", ".venv/bin")):
                candidates.update(line.split()[:2])
    paths = set()
    for token in candidates:
        token = token.rstrip(".,:;)").lstrip("(")
        if not re.fullmatch(r"[\w.\-/*]+", token) or token.startswith(("-", "http", ".", "/")):
            continue
        if PLACEHOLDER.search(token) or token.startswith(GENERATED):
            continue
        if "/" in token or token.endswith(EXTENSIONS) or token in ("course", "LICENSE"):
            paths.add(token)
    return paths


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_document_names_exists(doc):
    paths = named_paths((ROOT / doc).read_text())
    assert len(paths) > 10, sorted(paths)  # the parser still finds the paths
    missing = sorted(path for path in paths if not exists(path))
    assert not missing, f"{doc} names paths that do not exist in the repository: {missing}"


def exists(path: str) -> bool:
    """A path with a folder from the repository's root; a bare file name anywhere in the repository."""
    if "/" in path:
        return bool(list(ROOT.glob(path.rstrip("/"))))
    return any(not found.is_relative_to(ROOT / ".venv") for found in ROOT.rglob(path))


def test_the_parser_catches_a_missing_path():
    assert named_paths("see `benchmarks/no_such.json` and `./course test`") == {"benchmarks/no_such.json"}


def test_no_file_points_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    offenders = []
    for name in tracked.splitlines():
        path = ROOT / name
        if path.suffix in (".png", ".ico") or not path.is_file():
            continue
        text = path.read_text(errors="ignore")
        if "../shared" in text or "shared/COURSE_GUIDE" in text or "shared/STYLE" in text:
            offenders.append(name)
    offenders = [name for name in offenders if name != "tests/test_repository.py"]
    assert not offenders, f"these files point outside the repository: {offenders}"


def test_licences_are_in_place():
    assert "MIT License" in (ROOT / "LICENSES" / "MIT.txt").read_text()
    assert "Attribution 4.0 International" in (ROOT / "LICENSES" / "CC-BY-4.0.txt").read_text()
    licence = (ROOT / "LICENSE").read_text()
    assert "LICENSES/MIT.txt" in licence and "LICENSES/CC-BY-4.0.txt" in licence
    assert "CC BY 4.0" in (ROOT / "_config.yml").read_text()  # the book's footer


def test_readme_lists_every_record():
    """The README's table of records has a row for every stored record, with its seed count."""
    text = (ROOT / "README.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \|.*\| (\d+) \| [\d.]+ \|$", text, flags=re.M)}
    missing, wrong = [], []
    for path in sorted((ROOT / "code" / "attnbook" / "records").glob("*.json")):
        seeds = len(json.loads(path.read_text())["seeds"])
        if path.stem not in rows:
            missing.append(path.stem)
        elif int(rows[path.stem]) != seeds:
            wrong.append(f"{path.stem}: README {rows[path.stem]}, record {seeds}")
    assert not missing, "records without a README row: " + ", ".join(missing)
    assert not wrong, "seed counts: " + "; ".join(wrong)
