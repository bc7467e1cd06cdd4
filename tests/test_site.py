"""The website: it builds with zero warnings and works in a browser with no network.

The build runs `./course build-only` (the same Sphinx command as `./course site`, without
the install step). The browser check opens every page listed in _toc.yml in headless
Chromium, served from 127.0.0.1, with every other host unreachable, and asserts that math
is typeset by the MathJax copy the site carries, that every image loads, and that no
request tries to leave the machine.
"""

import functools
import http.server
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


@pytest.fixture(scope="session")
def built_site():
    """Build the site once per test session; return the build log."""
    result = subprocess.run(
        ["bash", str(ROOT / "course"), "build-only"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )
    log = result.stdout + result.stderr
    return result.returncode, log


def toc_pages():
    """Every page the table of contents lists, as paths relative to _build/html."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]
    parts = toc.get("parts", [{"chapters": toc.get("chapters", [])}])
    for chapter in (chapter for part in parts for chapter in part["chapters"]):
        pages.append(chapter["file"])
        pages.extend(section["file"] for section in chapter.get("sections", []))
    return [str(Path(page).with_suffix("")) + ".html" for page in pages]


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
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                # Networking off: every host name except the local server fails to resolve.
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            ],
        )
        yield browser
        browser.close()


def visit(browser, url, origin):
    """Open url; return (page, requests that left the machine, local failures)."""
    context = browser.new_context()
    outside, failures = [], []

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
    page.goto(url, wait_until="load")
    return context, page, outside, failures


def is_local(url, origin):
    parsed = urlparse(url)
    return parsed.scheme in ("data", "blob", "about") or url.startswith(origin)


@pytest.mark.parametrize("page_path", toc_pages())
def test_page_works_offline(browser, local_server, page_path):
    needs_figures = page_path not in PROSE_ONLY_PAGES
    context, page, outside, failures = visit(browser, f"{local_server}/{page_path}", local_server)
    try:
        if needs_figures:
            page.wait_for_selector("mjx-container", state="attached", timeout=20_000)
        typeset = page.locator("mjx-container").count()
        raw_tex = page.locator(".math:not(:has(mjx-container))").count()
        images = page.eval_on_selector_all(
            "img", "els => els.map(e => [e.getAttribute('src'), e.complete && e.naturalWidth > 0])"
        )
        page.wait_for_load_state("networkidle")
    finally:
        context.close()
    assert typeset > 0 or not needs_figures, f"{page_path}: MathJax typeset no math"
    assert raw_tex == 0, f"{page_path}: {raw_tex} math blocks were left as raw TeX"
    broken = [src for src, loaded in images if not loaded]
    assert images or not needs_figures, f"{page_path}: the page has no figures"
    assert broken == [], f"{page_path}: images that did not load: {broken}"
    assert outside == [], f"{page_path}: requests tried to leave the machine: {outside}"
    assert failures == [], f"{page_path}: local requests failed: {failures}"
