"""run_chapter: an evidence page runs its chapter's code, showing nothing, in its own variables."""

import json

import pytest

from attnbook.notebook import run_chapter


def notebook(tmp_path, *cells):
    """A notebook file of the given (source, tags) code cells, with a markdown cell first."""
    content = [{"cell_type": "markdown", "metadata": {}, "source": "# a chapter"}]
    for source, tags in cells:
        content.append({"cell_type": "code", "metadata": {"tags": tags}, "source": source, "outputs": []})
    path = tmp_path / "chapter.ipynb"
    path.write_text(json.dumps({"cells": content, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_the_chapters_variables_arrive_and_nothing_is_shown(tmp_path, capsys):
    path = notebook(tmp_path, ("x = 2\nprint('shown on the chapter only')", []), ("y = x * 21\ny", []))
    namespace = {}
    assert run_chapter(path, namespace) == 2
    assert namespace["y"] == 42
    assert capsys.readouterr().out == ""


def test_functions_defined_by_the_chapter_see_its_variables(tmp_path):
    path = notebook(tmp_path, ("scale = 3\ndef times(v):\n    return scale * v", []))
    namespace = {}
    run_chapter(path, namespace)
    namespace["scale"] = 4  # the evidence page rebinding a name is seen by the chapter's code
    assert namespace["times"](2) == 8


def test_a_deliberate_error_is_passed_over_and_any_other_names_its_cell(tmp_path):
    deliberate = notebook(tmp_path, ("1 / 0", ["raises-exception"]), ("z = 1", []))
    namespace = {}
    assert run_chapter(deliberate, namespace) == 2 and namespace["z"] == 1
    broken = notebook(tmp_path, ("a = 1", []), ("b = undefined_name", []))
    with pytest.raises(RuntimeError, match=r"chapter.ipynb: cell 2 failed: NameError"):
        run_chapter(broken, {})


def test_a_missing_notebook_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no notebook at path='.*nowhere.ipynb'"):
        run_chapter(tmp_path / "nowhere.ipynb", {})
