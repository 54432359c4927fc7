"""The website: its build, offline MathJax, and a Sphinx extension for the chapter pages.

- `build_site()` (`make book`, and the browser test where no site is given) builds the website
  into `_build/html` with warnings as errors. Sphinx rebuilds only what changed since the last
  build, so after `make book` the browser test's build takes seconds.
- `fetch_mathjax()` (run by `build_site`) puts a pinned MathJax 3 from the npm registry into
  `_vendor/mathjax/` (checked against the registry's sha512, licence included), which
  `_config.yml` serves from the site itself: formulas render offline and behind a proxy.
- The Sphinx extension (listed in `_config.yml`) stamps every chapter with what produced its
  stored outputs (written by `make refresh`/`make notebook` into the notebook's metadata) and
  what strict nbval compares on it; hides the Colab bootstrap cell, which a website reader
  never needs (it stays in the notebook); drops scripts the theme includes twice; and writes
  an index.html with a title.

    python -m booktools.maintain.website build
    python -m booktools.maintain.website fetch-mathjax
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from booktools.paths import REPO_ROOT

# MathJax 3 from npm (Apache-2.0). The integrity is the registry's `dist.integrity`.
MATHJAX_VERSION = "3.2.2"
MATHJAX_INTEGRITY = "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw=="
NPM_REGISTRY = os.environ.get("NPM_REGISTRY", "https://registry.npmjs.org").rstrip("/")
VENDOR_DIR = REPO_ROOT / "_vendor"
MATHJAX_DIR = VENDOR_DIR / "mathjax"

# The browser for tests/test_site.py: $BOOK_CHROMIUM if set (e.g. a Chrome installed by CI),
# else where Debian's `chromium` package puts it (the /usr/bin one is a wrapper script).
CHROMIUM_CANDIDATES = tuple(filter(None, (os.environ.get("BOOK_CHROMIUM"), "/usr/lib/chromium/chromium",
                                          "/usr/bin/chromium", "/usr/bin/chromium-browser")))


def fetch_mathjax(dest: Path = MATHJAX_DIR) -> Path:
    """Download, verify and unpack MathJax's `es5/` bundle into `dest` (once per version)."""
    marker = dest / ".version"
    if marker.exists() and marker.read_text().strip() == MATHJAX_VERSION:
        return dest
    url = f"{NPM_REGISTRY}/mathjax/-/mathjax-{MATHJAX_VERSION}.tgz"
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            data = response.read()
    except OSError as e:
        raise SystemExit(f"could not download MathJax {MATHJAX_VERSION} from {url}: {e}\n"
                         f"(set NPM_REGISTRY to a reachable npm registry mirror)") from e
    algorithm, _, expected = MATHJAX_INTEGRITY.partition("-")
    got = base64.b64encode(hashlib.new(algorithm, data).digest()).decode()
    if got != expected:
        raise SystemExit(f"{url}: {algorithm} is {got}, expected {expected}; not using it")
    staging = Path(tempfile.mkdtemp(prefix="mathjax-", dir=dest.parent if dest.parent.exists() else None))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar.getmembers():
                name = member.name.removeprefix("package/")
                if member.isfile() and (name.startswith("es5/") or name == "LICENSE"):
                    target = staging / name.removeprefix("es5/")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(tar.extractfile(member).read())
        (staging / ".version").write_text(MATHJAX_VERSION + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


SITE_DIR = REPO_ROOT / "_build" / "html"


def build_site(capture_output: bool = False) -> subprocess.CompletedProcess:
    """Build the website into SITE_DIR (Jupyter Book, HTML, nitpicky, warnings as errors, every
    page built before failing), MathJax fetched first."""
    fetch_mathjax()
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    return subprocess.run(
        [str(jupyter_book), "build", str(REPO_ROOT), "--builder", "html", "--nitpick", "--warningiserror",
         "--keep-going"],
        cwd=REPO_ROOT, capture_output=capture_output, text=True)


# ------------------------------------------------------------------------- Sphinx extension
def _notebook(app, docname: str):
    import nbformat

    path = Path(app.env.doc2path(docname))
    return nbformat.read(path, as_version=4) if path.suffix == ".ipynb" else None


def provenance_html(nb) -> str:
    """One paragraph: what produced the page's outputs, and what nbval compares on it."""
    from booktools.maintain import notebooks as nbtools

    stamp = nb.metadata.get("book", {}).get("provenance")
    cells = [c for c in nbtools.code_cells(nb) if "colab-bootstrap" not in c.metadata.get("tags", [])]
    exempt = sum(nbtools.is_ignored(c) for c in cells)
    compared = len(cells) - exempt
    if stamp:
        machine = stamp["cpu"] + (f", GPU: {stamp['gpu']}" if stamp.get("gpu") else ", no GPU")
        emulated = "; run as a CPU without AVX-512" if stamp.get("environment") else ""
        produced = (f"The outputs on this page were produced on {stamp['date']} by Python {stamp['python']} "
                    f"and torch {stamp['torch']} on {machine}{emulated}.")
    else:
        produced = "The outputs on this page carry no record of the run that produced them."
    checked = (f"<code>make test</code> re-runs the page and strict nbval compares the outputs of "
               f"{compared} of its {len(cells)} code cells")
    checked += (f"; {exempt} {'is' if exempt == 1 else 'are'} exempt because {'its' if exempt == 1 else 'their'} "
                f"output truly varies (timings, machine names)." if exempt else ".")
    return (f'<p class="book-provenance">{html.escape(produced)} {checked}</p>')


def _on_page(app, pagename, templatename, context, doctree):
    # sphinx-thebe and sphinx-togglebutton add their inline scripts twice (once with filename
    # None, once with ""), and the second `const THEBE_JS_URL` is a page error: keep one.
    seen, unique = set(), []
    for script in context.get("script_files", []):
        key = (str(getattr(script, "filename", script) or ""),
               json.dumps(getattr(script, "attributes", {}), sort_keys=True, default=str))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique
    if not pagename.startswith("chapters/") or "body" not in context:
        return
    nb = _notebook(app, pagename)
    if nb is None:
        return
    body = context["body"]
    end = body.find("</h1>")
    at = end + len("</h1>") if end >= 0 else 0
    context["body"] = body[:at] + provenance_html(nb) + body[at:]


def _drop_bootstrap_cells(app, doctree):
    from docutils import nodes

    for node in list(doctree.findall(nodes.container)):
        if "tag_colab-bootstrap" in node.get("classes", []):
            node.parent.remove(node)


def _write_index(app, exception):
    """The site's index.html: a redirect to the first page, with a title and a link (the
    default one, written by sphinx-external-toc only where none exists, has neither)."""
    if exception is not None or "html" not in app.builder.format or app.config.root_doc == "index":
        return
    target = f"{app.config.root_doc}.html"
    title = html.escape(app.config.html_title or app.config.project)
    (Path(app.outdir) / "index.html").write_text(
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
        f'<meta http-equiv="Refresh" content="0; url={target}">\n</head>\n'
        f'<body><p><a href="{target}">{title}</a></p></body>\n</html>\n', encoding="utf-8")


def _static_path(app):
    app.config.html_static_path.append(str(Path(__file__).with_name("website_static")))


def setup(app):
    app.connect("builder-inited", _static_path)
    app.connect("doctree-read", _drop_bootstrap_cells)
    app.connect("html-page-context", _on_page, priority=900)  # after the theme has added its scripts
    app.connect("build-finished", _write_index, priority=400)  # before sphinx-external-toc's
    app.add_css_file("book.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["build"]:
        return build_site().returncode
    if argv == ["fetch-mathjax"]:
        print(f"MathJax {MATHJAX_VERSION} in {fetch_mathjax().relative_to(REPO_ROOT)}")
        return 0
    print("\n".join(line.strip() for line in __doc__.strip().splitlines()[-2:]), file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
