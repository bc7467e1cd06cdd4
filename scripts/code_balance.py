"""How much of a module a reader scrolls through computes something (STYLE.md, "How to see where you stand").

    python scripts/code_balance.py                     # the model modules of attnbook
    python scripts/code_balance.py code/attnbook/x.py  # any files

Every non-blank line is put in one class:

- docs:      docstrings and comment-only lines;
- checks:    input validation: ``if ...: raise`` blocks, ``raise`` lines, calls of check functions
             (``checks.x(...)``, ``check_x(...)``, ``_check_x(...)``) and whole ``_check*`` functions;
- structure: imports, ``__all__``, decorators, ``def``/``class`` headers (signatures included);
- compute:   everything else (the lines that do the work, constructors' layers included).
"""

import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "code" / "attnbook"
MODEL_MODULES = ("attention.py", "rnn.py", "bahdanau.py", "luong.py", "transformer.py", "language_models.py")
CLASSES = ("docs", "checks", "structure", "compute")


def _is_check_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Expr) or not isinstance(node.value, ast.Call):
        return False
    func = node.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
    return owner == "checks" or name.startswith(("check", "_check"))


def _raises(node: ast.If) -> bool:
    return any(isinstance(child, ast.Raise) for child in ast.walk(node))


def classify(path: Path) -> dict[str, int]:
    source = path.read_text()
    lines = source.splitlines()
    kind: dict[int, str] = {}

    def mark(first: int, last: int, what: str, overwrite: bool = True) -> None:
        for number in range(first, last + 1):
            if overwrite or number not in kind:
                kind[number] = what

    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                mark(first.lineno, first.end_lineno, "docs")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mark(node.lineno, node.end_lineno, "structure")
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            mark(node.lineno, node.end_lineno, "structure")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                mark(decorator.lineno, decorator.end_lineno, "structure")
            mark(node.lineno, node.body[0].lineno - 1, "structure")
    for node in ast.walk(tree):  # checks win over the marks above
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_check"):
            mark(node.lineno, node.end_lineno, "checks")
        elif isinstance(node, ast.If) and _raises(node):
            mark(node.lineno, node.end_lineno, "checks")
        elif isinstance(node, ast.Raise) or _is_check_call(node):
            mark(node.lineno, node.end_lineno, "checks")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and lines[token.start[0] - 1].strip().startswith("#"):
            kind[token.start[0]] = "docs"
    counts = dict.fromkeys(CLASSES, 0)
    for number, line in enumerate(lines, start=1):
        if line.strip():
            counts[kind.get(number, "compute")] += 1
    return counts


def main(arguments: list[str]) -> None:
    paths = [Path(a) for a in arguments] or [PACKAGE / name for name in MODEL_MODULES if (PACKAGE / name).exists()]
    print(f"{'module':28} {'lines':>6} " + " ".join(f"{c:>9}" for c in CLASSES))
    for path in paths:
        counts = classify(path)
        total = sum(counts.values())
        shares = " ".join(f"{counts[c] / total:9.0%}" for c in CLASSES)
        print(f"{path.name:28} {total:6d} {shares}")


if __name__ == "__main__":
    main(sys.argv[1:])
