"""The website: it builds with zero warnings and works in a browser with no network.

The build runs `./course build-only` (the same Sphinx command as `./course site`, without
the install step). The browser check opens every page listed in _toc.yml in headless
Chromium, served from 127.0.0.1, with every other host unreachable, and asserts that math
is typeset by the MathJax copy the site carries, that every image loads, that the console
shows no errors, and that no request tries to leave the machine. On the pages with attention
explorers (attnbook.plot.attention_explorer) it points at query tokens with the mouse and the
keyboard, and changes layer and head, and checks that the weights shown are the right rows.
"""

import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
#: Pages of prose only: no math or figures are expected on them.
PROSE_ONLY_PAGES = {"bibliography.html"}
#: Every lesson page must show figures; an evidence page (tables and statistics beside a
#: lesson) must show every figure its notebook holds, and may hold none.
EVIDENCE_SUFFIX = "_evidence.html"
#: Pages with attention explorers, and how many each has.
EXPLORER_PAGES = {
    "chapters/04_self_attention.html": 3,
    "chapters/05_multi_head.html": 2,
    "chapters/06_transformer/03_experiment.html": 2,
}


@pytest.fixture(scope="session")
def built_site():
    """Build the site once per test session; return the build log."""
    result = subprocess.run(
        ["bash", str(ROOT / "course"), "build-only"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    log = result.stdout + result.stderr
    return result.returncode, log


def toc_pages():
    """Every page the table of contents lists, at any depth, as paths relative to _build/html."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    parts = toc.get("parts", [{"chapters": toc.get("chapters", [])}])

    def files(entries):
        for entry in entries:
            yield entry["file"]
            yield from files(entry.get("sections", []))

    pages = [toc["root"], *files(chapter for part in parts for chapter in part["chapters"])]
    return [str(Path(page).with_suffix("")) + ".html" for page in pages]


def source_figure_count(page_path):
    """How many figures the page's source holds: image outputs and markdown images."""
    stem = ROOT / Path(page_path).with_suffix("")
    notebook = stem.with_suffix(".ipynb")
    if not notebook.is_file():
        text = stem.with_suffix(".md").read_text()
        return text.count("![") + text.count("```{figure}") + text.count("```{image}")
    count = 0
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"])
            count += text.count("![") + text.count("```{figure}") + text.count("```{image}")
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and not {"remove-output", "remove-cell"} & set(tags):
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                count += "image/png" in data or "image/svg+xml" in data
    return count


def test_site_builds_without_warnings(built_site):
    returncode, log = built_site
    warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    assert returncode == 0, f"the book build failed:\n{log[-4000:]}"
    assert warnings == [], "the book build printed warnings:\n" + "\n".join(warnings)


def test_every_toc_page_was_built(built_site):
    assert built_site[0] == 0
    missing = [page for page in toc_pages() if not (HTML / page).is_file()]
    assert missing == []


def test_site_carries_its_own_mathjax(built_site):
    assert built_site[0] == 0
    assert (HTML / "_static" / "mathjax" / "tex-chtml.js").is_file()
    intro = (HTML / "intro.html").read_text()
    assert "_static/mathjax/tex-chtml.js" in intro
    assert "cdn.jsdelivr.net" not in intro


def test_every_page_has_one_search_field(built_site):
    """The sidebar's; not a second, full-width one in the page header (a theme default)."""
    assert built_site[0] == 0
    for page in toc_pages():
        html = (HTML / page).read_text()
        assert html.count('class="btn search-button-field') == 1, page
        assert "navbar-persistent" not in html, page


def find_chromium():
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="session")
def chromium():
    path = find_chromium()
    if path is None:
        message = "no Chromium found (install Debian's `chromium` package to run the browser check)"
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but " + message)
        pytest.skip(message)
    return path


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def local_server(built_site):
    assert built_site[0] == 0, "the site did not build"
    handler = functools.partial(QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="session")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                # Networking off: every host name except the local server fails to resolve.
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            ],
        )
        yield browser
        browser.close()


def visit(browser, url, origin):
    """Open url; return (context, page, requests that left the machine, local failures, console errors)."""
    context = browser.new_context()
    outside, failures, errors = [], [], []

    def route(request_route):
        request = request_route.request
        if is_local(request.url, origin):
            request_route.continue_()
        else:
            outside.append(request.url)
            request_route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", lambda r: failures.append(f"failed {r.url}") if is_local(r.url, origin) else None)
    page.on("console", lambda m: errors.append(f"{m.text} ({m.location.get('url')})") if m.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    page.goto(url, wait_until="load")
    return context, page, outside, failures, errors


def is_local(url, origin):
    parsed = urlparse(url)
    return parsed.scheme in ("data", "blob", "about") or url.startswith(origin)


@pytest.mark.parametrize("page_path", toc_pages())
def test_page_works_offline(browser, local_server, page_path):
    needs_math = page_path not in PROSE_ONLY_PAGES
    figures_in_source = source_figure_count(page_path) if needs_math else 0
    needs_figures = needs_math and not page_path.endswith(EVIDENCE_SUFFIX)
    context, page, outside, failures, errors = visit(browser, f"{local_server}/{page_path}", local_server)
    try:
        if needs_math:
            page.wait_for_selector("mjx-container", state="attached", timeout=20_000)
        typeset = page.locator("mjx-container").count()
        raw_tex = page.locator(".math:not(:has(mjx-container))").count()
        images = page.eval_on_selector_all(
            "img", "els => els.map(e => [e.getAttribute('src'), e.complete && e.naturalWidth > 0])"
        )
        page.wait_for_load_state("networkidle")
    finally:
        context.close()
    assert typeset > 0 or not needs_math, f"{page_path}: MathJax typeset no math"
    assert raw_tex == 0, f"{page_path}: {raw_tex} math blocks were left as raw TeX"
    broken = [src for src, loaded in images if not loaded]
    assert images or not needs_figures, f"{page_path}: the page has no figures"
    assert len(images) >= figures_in_source, (
        f"{page_path}: the page shows {len(images)} images; its source holds {figures_in_source}"
    )
    assert broken == [], f"{page_path}: images that did not load: {broken}"
    assert outside == [], f"{page_path}: requests tried to leave the machine: {outside}"
    assert failures == [], f"{page_path}: local requests failed: {failures}"
    assert errors == [], f"{page_path}: the console shows errors: {errors}"


# --------------------------------------------------------------------- attention explorers


def explorer_data(explorer):
    """The weights and tokens an explorer carries (its JSON)."""
    return json.loads(explorer.locator("script.ae-data").text_content())


def shown_rows(explorer):
    """{head: [weight as printed, per key]} for the rows of key tokens the explorer shows."""
    rows = explorer.locator(".ae-row:not([hidden])")
    return {int(row.get_attribute("data-head")): row.locator(".ae-weight").all_text_contents() for row in rows.all()}


def expected_row(data, layer, head, query):
    return [f"{weight / 100:.2f}" for weight in data["weights"][layer][head][query]]


def pressed(explorer):
    return [button.get_attribute("aria-pressed") for button in explorer.locator(".ae-query").all()].index("true")


@pytest.fixture
def open_page(browser, local_server):
    contexts = []

    def open_(page_path):
        context, page, outside, failures, errors = visit(browser, f"{local_server}/{page_path}", local_server)
        contexts.append((context, page_path, outside, errors))
        return page

    yield open_
    for context, page_path, outside, errors in contexts:
        context.close()
        assert outside == [] and errors == [], f"{page_path}: {outside} {errors}"


@pytest.mark.parametrize("page_path, count", EXPLORER_PAGES.items())
def test_explorers_are_on_their_pages_and_start_on_their_first_view(open_page, page_path, count):
    page = open_page(page_path)
    explorers = page.locator(".attention-explorer")
    assert explorers.count() == count
    for explorer in explorers.all():
        assert explorer.get_attribute("data-ready") == "", "the explorer's script did not run"
        data = explorer_data(explorer)
        heads = range(len(data["weights"][0])) if data["head"] == "all" else [data["head"]]
        assert shown_rows(explorer) == {h: expected_row(data, data["layer"], h, data["query"]) for h in heads}
        assert pressed(explorer) == data["query"]


def test_pointing_at_a_query_token_shows_its_row(open_page):
    page = open_page("chapters/04_self_attention.html")
    explorer = page.locator(".attention-explorer").first
    data = explorer_data(explorer)
    layer, head, start = data["layer"], data["head"], data["query"]
    before = shown_rows(explorer)[head]
    assert before == expected_row(data, layer, head, start)
    buttons = explorer.locator(".ae-query")
    for query in (1, 5):  # hover
        buttons.nth(query).hover()
        assert shown_rows(explorer) == {head: expected_row(data, layer, head, query)}
        assert pressed(explorer) == query
    assert expected_row(data, layer, head, 5) != before  # the rows differ, so the check can fail
    buttons.nth(3).dispatch_event("click")  # a click alone (a real click hovers first)
    assert shown_rows(explorer) == {head: expected_row(data, layer, head, 3)}
    page.mouse.move(0, 0)  # leaving the tokens keeps the last one
    assert pressed(explorer) == 3


def test_the_keyboard_moves_between_query_tokens(open_page):
    page = open_page("chapters/04_self_attention.html")
    explorer = page.locator(".attention-explorer").nth(2)
    data = explorer_data(explorer)
    layer, head, start = data["layer"], data["head"], data["query"]
    buttons = explorer.locator(".ae-query")
    assert [b.get_attribute("tabindex") for b in buttons.all()].count("0") == 1  # one Tab stop for the tokens
    buttons.nth(start).focus()
    page.keyboard.press("ArrowRight")
    assert pressed(explorer) == start + 1
    assert shown_rows(explorer) == {head: expected_row(data, layer, head, start + 1)}
    page.keyboard.press("Home")
    assert pressed(explorer) == 0 and shown_rows(explorer) == {head: expected_row(data, layer, head, 0)}
    page.keyboard.press("ArrowLeft")  # stays on the first
    assert pressed(explorer) == 0
    page.keyboard.press("End")
    assert pressed(explorer) == len(data["queries"]) - 1


def test_menus_choose_the_layer_and_the_heads(open_page):
    page = open_page("chapters/06_transformer/03_experiment.html")
    explorer = page.locator(".attention-explorer").first
    data = explorer_data(explorer)
    layers, heads = len(data["weights"]), len(data["weights"][0])
    assert layers > 1 and heads > 1
    query = 2
    explorer.locator(".ae-query").nth(query).click()
    explorer.locator("select.ae-head").select_option("1")
    explorer.locator("select.ae-layer").select_option(str(layers - 1))
    assert shown_rows(explorer) == {1: expected_row(data, layers - 1, 1, query)}
    explorer.locator("select.ae-head").select_option("all")
    assert shown_rows(explorer) == {h: expected_row(data, layers - 1, h, query) for h in range(heads)}
    status = explorer.locator(".ae-status").text_content()
    assert f"layer {layers}" in status and f"in head {heads}" in status


def test_explorers_on_one_page_do_not_interfere(browser):
    """Two explorers and one whose scripts a notebook removed (an untrusted output): each script sets up what
    it can, a stripped explorer stays text without an error, and pointing in one leaves the other alone."""
    from attnbook.plot import attention_explorer

    weights = [[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]], [[0.2, 0.5, 0.3], [0.3, 0.3, 0.4]]]
    first, second = (attention_explorer("ab", "xyz", w, title=t) for w, t in ((weights[0], "one"), (weights[1], "two")))
    stripped = first.html.split("<script")[0] + "</div>"
    context = browser.new_context()
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.set_content(f"<html><body>{stripped}{first.html}{second.html}</body></html>")
        explorers = page.locator(".attention-explorer")
        assert [e.get_attribute("data-ready") for e in explorers.all()] == [None, "", ""]
        one, two = explorers.nth(1), explorers.nth(2)
        one.locator(".ae-query").nth(1).hover()
        assert shown_rows(one) == {0: ["0.10", "0.10", "0.80"]}
        assert shown_rows(two) == {0: ["0.20", "0.50", "0.30"]} and pressed(two) == 0
    finally:
        context.close()
    assert errors == []
