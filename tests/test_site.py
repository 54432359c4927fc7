"""The website, opened in a real browser: every page, at desktop and phone sizes, offline.

The site is built from the committed notebooks as `make book` builds it (into _build/html, where
Sphinx rebuilds only what changed since the last build), served on 127.0.0.1,
and opened in headless Chromium (Debian's `chromium`, driven by Playwright) with every
non-local request blocked, as for a reader offline or behind a proxy. A page fails on a
script error, a console error, a local request that fails, a broken internal link or anchor,
TeX that MathJax left raw, code without highlighting, a chapter without its Colab and
download links or provenance stamp, a phone menu that does not open, a page wider than a
phone, or a code cell that scrolls sideways on a laptop. Screenshots of the intro and one
chapter at both sizes go to _build/screenshots/.

Skipped, with the reason, where Chromium or Playwright is missing; `.ci/run` installs both
and sets BOOK_REQUIRE_BROWSER=1, which turns the skip into a failure.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import os
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from booktools.maintain.website import CHROMIUM_CANDIDATES, SITE_DIR, build_site
from booktools.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # a browser and a built website: not in make test-fast

DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}
SCREENSHOTS = REPO_ROOT / "_build" / "screenshots"


def chromium_binary() -> str | None:
    for candidate in CHROMIUM_CANDIDATES:
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _require_browser():
    reason = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "Playwright is not installed (pip install -r requirements.txt)"
    if reason is None and chromium_binary() is None:
        reason = "Chromium is not installed (Debian: apt-get install chromium)"
    if reason:
        if os.environ.get("BOOK_REQUIRE_BROWSER") == "1":
            pytest.fail(f"BOOK_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)


def chapter_pages() -> list[str]:
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [f"{ch['file']}.html" for part in toc["parts"] for ch in part["chapters"]]


@pytest.fixture(scope="session")
def site():
    """The website built from the committed notebooks by `make book`'s build, into _build/html
    (after `make book`, Sphinx finds nothing to rebuild); or, where BOOK_SITE_DIR names one
    (`.ci/run`: the site `make book` just built), that one."""
    _require_browser()
    built = os.environ.get("BOOK_SITE_DIR")
    if built:
        assert (Path(built) / "index.html").is_file(), f"BOOK_SITE_DIR={built} holds no built website"
        return Path(built)
    result = build_site(capture_output=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return SITE_DIR


@pytest.fixture(scope="session")
def server(site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


@pytest.fixture(scope="session")
def browser():
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_binary(), args=["--no-sandbox"])
        yield b
        b.close()


class Visit:
    """One page in one viewport: what went wrong while it loaded, and the page itself."""

    def __init__(self, browser, base: str, page: str, viewport: dict):
        self.context = browser.new_context(viewport=viewport)
        self.blocked, self.errors = [], []
        self.context.route("**/*", self._route(base))
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(f"console error: {m.text}"))
        self.page.on("requestfailed", lambda r: r.url.startswith(base) and self.errors.append(
            f"local request failed: {r.url} ({r.failure})"))
        self.page.on("response", lambda r: r.url.startswith(base) and r.status >= 400 and self.errors.append(
            f"local request {r.status}: {r.url}"))
        self.page.goto(base + page, wait_until="load")
        # MathJax typesets after load; wait for it where there is math.
        self.page.wait_for_function(
            "!window.MathJax || !MathJax.startup || !MathJax.startup.promise ? true : "
            "MathJax.startup.promise.then(() => true)", timeout=30000)

    def _route(self, base):
        def handle(route):
            if route.request.url.startswith(base):
                route.continue_()
            else:  # the site must not need the network
                self.blocked.append(route.request.url)
                route.abort()
        return handle

    def close(self):
        self.context.close()


PAGES = ["intro.html", *chapter_pages(), "search.html", "genindex.html"]


def page_problems(visit: Visit, page: str, viewport: dict) -> list[str]:
    """What is wrong with the loaded page, laid out in `viewport` (it resizes the window)."""
    p = visit.page
    p.set_viewport_size(viewport)
    problems = list(visit.errors)
    problems += [f"needs the network: {url}" for url in visit.blocked]
    raw_tex = p.evaluate("""Array.from(document.querySelectorAll('span.math, div.math'))
        .filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 40))""")
    problems += [f"raw TeX: {t}" for t in raw_tex]
    width = p.evaluate("document.documentElement.scrollWidth")
    if width > viewport["width"]:
        problems.append(f"page is {width} px wide in a {viewport['width']} px window")
    if page.startswith("chapters/"):
        if not p.query_selector("a[href*='colab.research.google.com']"):
            problems.append("no Colab launch link")
        if not p.query_selector("a[href$='.ipynb']"):
            problems.append("no download link for the notebook")
        if not p.query_selector(".book-provenance"):
            problems.append("no provenance stamp")
        if p.query_selector(".tag_colab-bootstrap"):
            problems.append("the Colab bootstrap cell is shown")
        if not p.query_selector("a[href*='/edit/']") or not p.query_selector("a[href*='/issues/new']"):
            problems.append("no edit-this-page or open-an-issue button")
        unnamed = p.evaluate("""Array.from(document.querySelectorAll('article img'))
            .filter(e => !e.alt || /\\.(png|svg|jpe?g)$/.test(e.alt)).map(e => e.src.split('/').pop())""")
        problems += [f"figure without alt text: {src}" for src in unnamed]
        cells = p.query_selector_all("div.cell_input div.highlight pre")
        if cells and not any(c.query_selector("span") for c in cells):
            problems.append("code cells are not highlighted")
        if viewport is DESKTOP:
            sideways = p.evaluate("""Array.from(document.querySelectorAll('div.cell_input pre'))
                .filter(e => e.scrollWidth > e.clientWidth + 1)
                .map(e => e.textContent.split('\\n').reduce((a, b) => b.length > a.length ? b : a, ''))""")
            problems += [f"code cell scrolls sideways: {line[:100]!r}" for line in sideways]
    return problems


@pytest.mark.parametrize("page", PAGES)
def test_page_loads_cleanly_offline(browser, server, page):
    # Loaded once, at desktop size, then laid out again at phone size: a page's layout follows
    # the window (CSS media queries, the theme's resize handlers), and loading it a second time
    # doubled the test's time.
    visit = Visit(browser, server, page, DESKTOP)
    try:
        for viewport in (DESKTOP, PHONE):
            problems = page_problems(visit, page, viewport)
            assert problems == [], f"{page} at {viewport['width']} px:\n" + "\n".join(problems)
            if page in ("intro.html", "chapters/linear_layer_math.html"):
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                visit.page.screenshot(path=str(SCREENSHOTS / f"{Path(page).stem}-{viewport['width']}px.png"))
    finally:
        visit.close()


def test_the_page_checks_bite(browser, server, site):
    """A chapter page broken on purpose: a script error, a missing local file, an external
    script, raw TeX, a wide element, no launch links and no stamp are all reported."""
    broken = site / "chapters" / "broken-on-purpose.html"
    broken.write_text("""<html><body>
        <script>throw new Error("boom")</script>
        <script src="https://cdn.example.com/x.js"></script>
        <article><img src="../_images/missing.png" alt="../_images/missing.png"></article>
        <span class="math notranslate nohighlight">\\(x^2\\)</span>
        <div style="width: 2000px">wide</div>
        <div class="cell_input"><div class="highlight"><pre>""" + "x = 1 + " * 40 + """</pre></div></div>
        </body></html>""", encoding="utf-8")
    try:
        visit = Visit(browser, server, "chapters/broken-on-purpose.html", DESKTOP)
        found = "\n".join(page_problems(visit, "chapters/broken-on-purpose.html", DESKTOP))
        visit.close()
    finally:
        broken.unlink()
    for expected in ["page error: boom", "local request 404", "needs the network: https://cdn.example.com",
                     "raw TeX", "px wide in a 1400 px window", "no Colab launch link", "no download link",
                     "no provenance stamp", "code cells are not highlighted", "code cell scrolls sideways",
                     "no edit-this-page", "figure without alt text: missing.png"]:
        assert expected in found, f"{expected!r} not reported in:\n{found}"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_menu_button_opens_the_chapter_list(browser, server, viewport):
    visit = Visit(browser, server, "chapters/tensors.html", viewport)
    try:
        p = visit.page
        link = "a.reference.internal[href='resnet.html']"
        if viewport is PHONE:
            assert not p.is_visible(f"#pst-primary-sidebar {link}"), "the chapter list shows before the menu is opened"
        p.click("button.primary-toggle")
        p.wait_for_timeout(500)
        visible = p.evaluate(f"""Array.from(document.querySelectorAll("{link}"))
            .some(e => {{ const r = e.getBoundingClientRect();
                          return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= innerWidth; }})""")
        if viewport is PHONE:
            assert visible, "tapping the menu button does not show the chapter list"
        else:  # on a desktop the list is shown; the button hides it
            assert not visible, "clicking the menu button does not hide the chapter list"
        assert visit.errors == []
    finally:
        visit.close()


def test_dark_mode_toggle_works(browser, server):
    visit = Visit(browser, server, "chapters/tensors.html", DESKTOP)
    try:
        p = visit.page
        before = p.evaluate("document.documentElement.dataset.theme")
        p.click("button.theme-switch-button")
        after = p.evaluate("document.documentElement.dataset.theme")
        assert before != after and {before, after} <= {"light", "dark"}, (before, after)
        assert visit.errors == []
    finally:
        visit.close()


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.hrefs = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def test_no_broken_internal_links_or_anchors(site):
    pages = {}
    for path in site.rglob("*.html"):
        parser = _Links()
        parser.feed(path.read_text(encoding="utf-8"))
        pages[path] = parser
    broken = []
    for path, parser in pages.items():
        for href in parser.hrefs:
            url = urllib.parse.urlsplit(href)
            if url.scheme or url.netloc or href.startswith(("mailto:", "javascript:")):
                continue
            target = (path.parent / urllib.parse.unquote(url.path)).resolve() if url.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site)}: {href} (no such file)")
            elif url.fragment and target.suffix == ".html" and url.fragment not in pages[target].ids:
                broken.append(f"{path.relative_to(site)}: {href} (no such anchor)")
    assert broken == []


def test_index_page_has_a_title_and_leads_to_the_intro(browser, server):
    visit = Visit(browser, server, "index.html", DESKTOP)
    try:
        visit.page.wait_for_url("**/intro.html")
        assert visit.page.title().startswith("PyTorch from the Inside")
        assert visit.errors == []
    finally:
        visit.close()
    with urllib.request.urlopen(server + "index.html") as response:
        assert "<title>PyTorch from the Inside</title>" in response.read().decode()


def test_mathjax_is_served_by_the_site(site):
    assert (site / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()
    assert (site / "_static" / "mathjax" / "LICENSE").is_file()
    assert "cdn.jsdelivr.net" not in (site / "chapters" / "linear_layer_math.html").read_text(encoding="utf-8")
