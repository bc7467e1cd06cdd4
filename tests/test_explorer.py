"""attnbook.plot.attention_explorer: the HTML it produces (the browser behaviour is in test_site.py)."""

import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest
import torch

from attnbook.plot import AttentionExplorer, attention_explorer


def _weights(*shape, seed=0):
    return torch.softmax(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), dim=-1)


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text inside each script element."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.scripts, self._in_script = [], [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs).get("type", "text/javascript")
            self.scripts.append([self._in_script, ""])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1][1] += data

    def with_class(self, name):
        return [attrs for tag, attrs in self.tags if name in attrs.get("class", "").split()]


def _data(explorer):
    (payload,) = [text for kind, text in _Elements(explorer.html).scripts if kind == "application/json"]
    return json.loads(payload)


@pytest.mark.parametrize("shape, layers, heads", [((4, 5), 1, 1), ((3, 4, 5), 1, 3), ((2, 3, 4, 5), 2, 3)])
def test_weights_travel_as_json_in_hundredths(shape, layers, heads):
    weights = _weights(*shape)
    explorer = attention_explorer(list("abcd"), "vwxyz", weights, title="demo")
    data = _data(explorer)
    stored = np.array(data["weights"])
    assert stored.shape == (layers, heads, 4, 5)
    np.testing.assert_array_equal(stored, np.rint(weights.reshape(layers, heads, 4, 5).numpy() * 100))
    assert data["queries"] == list("abcd") and data["keys"] == list("vwxyz") and data["title"] == "demo"


def test_html_has_the_tokens_the_menus_and_one_row_per_head():
    page = _Elements(attention_explorer(["the", "cat"], ["a", " ", "c"], _weights(2, 4, 2, 3)).html)
    (root,) = page.with_class("attention-explorer")
    assert root["id"].startswith("attention-explorer-")
    assert len(page.with_class("ae-query")) == 2
    assert len(page.with_class("ae-row")) == 4 and len(page.with_class("ae-key")) == 4 * 3
    assert len(page.with_class("ae-layer")) == 1 and len(page.with_class("ae-head")) == 1
    assert '<option value="all">all heads</option>' in attention_explorer("ab", "abc", _weights(2, 2, 3)).html
    assert ">␣<" in attention_explorer("ab", "a c", _weights(2, 3)).html  # a space stays visible
    one_head = _Elements(attention_explorer("ab", "abc", _weights(2, 3)).html)
    assert one_head.with_class("ae-layer") == [] and one_head.with_class("ae-head") == []


def test_output_is_deterministic_and_its_id_follows_the_content():
    weights = _weights(2, 4, 5)
    first = attention_explorer("abcd", "vwxyz", weights).html
    assert attention_explorer("abcd", "vwxyz", weights.clone()).html == first
    other = attention_explorer("abcd", "vwxyz", _weights(2, 4, 5, seed=1)).html
    ids = [re.search(r'id="(attention-explorer-[0-9a-f]{12})"', html).group(1) for html in (first, other)]
    assert ids[0] != ids[1]
    assert attention_explorer("abcd", "vwxyz", weights, title="another").html != first


def test_self_contained_nothing_is_fetched():
    html = attention_explorer("abc", "abc", _weights(3, 3)).html
    assert not re.search(r"\b(src|href)\s*=", html)
    assert "http" not in html and "@import" not in html and "url(" not in html
    page = _Elements(html)
    assert [kind for kind, _ in page.scripts] == ["application/json", "text/javascript"]
    assert "document.currentScript" in page.scripts[1][1]  # the course's script, inline


def test_tokens_cannot_break_out_of_the_html():
    tokens = ["</script>", "<b>", "a&b", '"q"']
    explorer = attention_explorer(tokens, tokens, _weights(4, 4), title="<i>title</i>")
    page = _Elements(explorer.html)
    assert [tag for tag, _ in page.tags].count("b") == 0 and [tag for tag, _ in page.tags].count("i") == 0
    assert len(page.scripts) == 2  # no token closed the JSON's script element early
    data = _data(explorer)
    assert data["queries"] == tokens and data["title"] == "<i>title</i>"


def test_repr_and_repr_html():
    explorer = attention_explorer("ab", "abc", _weights(2, 4, 2, 3, seed=2), title="t")
    assert isinstance(explorer, AttentionExplorer)
    assert explorer._repr_html_() == explorer.html
    assert repr(explorer) == "AttentionExplorer('t': 2 layer(s) x 4 head(s), 2 queries x 3 keys)"


def test_accepts_arrays_lists_and_tensors_that_need_grad():
    weights = _weights(2, 3).requires_grad_()
    expected = _data(attention_explorer("ab", "abc", weights.detach()))["weights"]
    assert _data(attention_explorer("ab", "abc", weights))["weights"] == expected
    assert _data(attention_explorer("ab", "abc", weights.detach().numpy()))["weights"] == expected
    data = _data(
        attention_explorer(torch.tensor([3, 4]), [5, 6, 7], [[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], query=np.int64(1))
    )
    assert data["queries"] == ["3", "4"] and data["keys"] == ["5", "6", "7"] and data["query"] == 1
    assert data["weights"] == [[[[50, 50, 0], [20, 30, 50]]]]


def test_script_and_style_ship_with_the_package():
    """The explorer reads them from attnbook/static; pyproject.toml must list them as package data."""
    import tomllib
    from pathlib import Path

    import attnbook

    static = Path(attnbook.__file__).parent / "static"
    pyproject = tomllib.loads((Path(attnbook.__file__).parent.parent / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["attnbook"]
    shipped = {path.name for pattern in patterns for path in static.parent.glob(pattern)}
    assert {"attention_explorer.js", "attention_explorer.css"} <= shipped


def test_the_first_view_can_be_chosen():
    data = _data(attention_explorer("abc", "abc", _weights(2, 2, 3, 3), query=2, layer=1, head="all"))
    assert (data["query"], data["layer"], data["head"]) == (2, 1, "all")


@pytest.mark.parametrize(
    "weights, message",
    [
        (
            _weights(5),
            r"weights must have shape \(T_q, T_k\), \(H, T_q, T_k\) or \(layers, H, T_q, T_k\), "
            r"got shape \(5,\)$",
        ),
        (_weights(1, 1, 2, 4, 5), r"got shape \(1, 1, 2, 4, 5\); for a batch, pass one example, e.g. weights\[0\]"),
        (
            _weights(4, 4),
            r"weights have shape \(4, 4\) but there are 4 query tokens and 5 key tokens: "
            r"the last two dimensions must be \(4, 5\)$",
        ),
        (_weights(2, 5, 4), r"shape \(2, 5, 4\) .* must be \(4, 5\) \(swapped query_tokens and key_tokens\?\)"),
        (_weights(4, 5) * 3, r"must lie in \[0, 1\], but these range from .* did you pass scores"),
        (torch.full((4, 5), float("nan")), r"weights contain NaN or infinite values \(shape \(4, 5\)\)"),
    ],
)
def test_bad_weights_get_a_clear_error(weights, message):
    with pytest.raises(ValueError, match=message):
        attention_explorer("abcd", "vwxyz", weights)


@pytest.mark.parametrize(
    "start, message",
    [
        (
            dict(query=4),
            r"query must be an int in \[0, 3\] for weights of shape \(layers, H, T_q, T_k\) = "
            r"\(2, 3, 4, 5\), got 4",
        ),
        (dict(layer=-1), r"layer must be an int in \[0, 1\] .* got -1"),
        (dict(head=3), r'head must be an int in \[0, 2\] or "all" .* got 3'),
        (dict(head="every"), r"head must be .* got 'every'"),
        (dict(query=True), r"query must be an int .* got True"),
    ],
)
def test_bad_first_view_gets_a_clear_error(start, message):
    with pytest.raises(ValueError, match=message):
        attention_explorer("abcd", "vwxyz", _weights(2, 3, 4, 5), **start)
