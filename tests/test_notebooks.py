"""Rules for the committed notebooks that nbval itself does not enforce."""

import subprocess

import nbformat
import pytest
import yaml

from booktools import nbtools
from booktools.colab import bootstrap_cell_source
from booktools.paths import REPO_ROOT, repository_url

NOTEBOOKS = nbtools.all_notebooks()


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_the_rules(path):
    toc = (REPO_ROOT / "_toc.yml").read_text(encoding="utf-8")
    assert nbtools.problems(path, toc, bootstrap_cell_source(repository_url())) == []


def test_toc_lists_only_existing_pages():
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    for name in files:
        candidates = [REPO_ROOT / f"{name}{ext}" for ext in (".md", ".ipynb")]
        assert any(c.is_file() for c in candidates), f"_toc.yml lists {name}, which does not exist"
    assert len(files) == len(set(files))


def test_config_shows_stored_outputs_and_offers_colab():
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert {"dollarmath", "amsmath", "colon_fence"} <= set(config["parse"]["myst_enable_extensions"])
    assert config["sphinx"]["config"]["nitpicky"] is True


def test_repository_url_is_written_in_one_place():
    """Only _config.yml spells out the URL; notebooks carry it in the generated bootstrap cell."""
    url = repository_url()
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    generated = bootstrap_cell_source(url)
    offenders = []
    for name in tracked:
        path = REPO_ROOT / name
        if name == "_config.yml" or not path.is_file():
            continue
        if path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            text = "".join(c.source for c in nb.cells if c.source != generated)
        else:
            text = path.read_text(encoding="utf-8", errors="ignore")
        if url in text:
            offenders.append(name)
    assert offenders == [], f"these files repeat the repository URL instead of deriving it: {offenders}"


def test_ignored_output_share_is_small_overall():
    cells = [c for p in NOTEBOOKS for c in nbtools.code_cells(nbformat.read(p, as_version=4))]
    ignored = sum(nbtools.is_ignored(c) for c in cells)
    assert ignored / len(cells) <= nbtools.MAX_IGNORED_SHARE


def part_chapters(caption_prefix: str) -> list:
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [REPO_ROOT / f"{ch['file']}.ipynb" for part in toc["parts"] if part["caption"].startswith(caption_prefix)
            for ch in part["chapters"]]


@pytest.mark.parametrize("path", part_chapters("Part III"), ids=lambda p: p.name)
def test_no_measured_figure_is_typed_into_prose(path):
    """Speeds, peaks, cache sizes, clocks, times and ratios come from this run's outputs
    (glued) or from a cell reading a named results file, never from the prose."""
    assert nbtools.typed_figures(nbformat.read(path, as_version=4)) == []


def test_the_typed_figure_rule_bites():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("The kernel reaches 310 GFLOP/s, 1.64x torch.mm, on 48 KB of L1."),
        nbformat.v4.new_markdown_cell("It reaches {glue:text}`auto_gflops` GFLOP/s; a $12 \\times 32$ tile, `kc = 256`, 12 x 32."),
    ])
    found = nbtools.typed_figures(nb)
    assert len(found) == 1 and found[0].startswith("cell 0")
