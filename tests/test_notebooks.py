"""Rules for the committed notebooks that nbval itself does not enforce."""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from booktools.maintain import notebook_rules, notebooks
from booktools.colab import bootstrap_cell_source
from booktools.paths import CHAPTERS_DIR, REPO_ROOT, repository_url

NOTEBOOKS = notebooks.all_notebooks()


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_the_rules(path):
    toc = (REPO_ROOT / "_toc.yml").read_text(encoding="utf-8")
    assert notebook_rules.problems(path, toc, bootstrap_cell_source(repository_url())) == []


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
    cells = [c for p in NOTEBOOKS for c in notebooks.code_cells(nbformat.read(p, as_version=4))]
    ignored = sum(notebooks.is_ignored(c) for c in cells)
    assert ignored / len(cells) <= notebooks.MAX_IGNORED_SHARE


def part_chapters(caption_prefix: str) -> list:
    """The notebooks of the parts whose caption starts so (a page in markdown, such as the
    appendix on the book's checks, is no chapter with code)."""
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [REPO_ROOT / ch["file"] for part in toc["parts"] if part["caption"].startswith(caption_prefix)
             for ch in part["chapters"]]
    return [page.with_suffix(".ipynb") for page in pages if not page.with_suffix(".md").is_file()]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_measured_figure_is_typed_into_prose(path):
    """Speeds, peaks, cache sizes, clocks, times and ratios come from this run's outputs
    (glued) or from a cell reading a named results file, never from the prose; quotations
    (blockquotes) and math are exempt. Every chapter, not only Part III."""
    assert notebook_rules.typed_figures(nbformat.read(path, as_version=4)) == []


def test_the_typed_figure_rule_bites():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("The kernel reaches 310 GFLOP/s, 1.64x torch.mm, on 48 KB of L1."),
        nbformat.v4.new_markdown_cell("It reaches {glue:text}`auto_gflops` GFLOP/s; a $12 \\times 32$ tile, `kc = 256`, 12 x 32."),
        nbformat.v4.new_markdown_cell("Zen 5 has 512-bit FMA units, so it is twice as fast."),
        nbformat.v4.new_markdown_cell("> The notes: 24222MiB / 24268MiB used, twice as fast."),
    ])
    found = notebook_rules.typed_figures(nb)
    assert [f.split(":")[0] for f in found] == ["cell 0", "cell 2"]


def test_generated_modules_match_their_chapters():
    """booktools/generated/ holds what the chapters export; editing a chapter without
    `make sync` (or editing a generated file by hand) fails here."""
    assert notebooks.stale_exports() == []


def test_export_takes_the_marked_cells_in_order(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("#| export\nimport math\n\ndef area(r):\n    return math.pi * r * r"),
        nbformat.v4.new_code_cell("print(area(1.0))  # a lesson cell, not exported"),
        nbformat.v4.new_code_cell("#| export\nUNIT = area(1.0)"),
    ])
    path = tmp_path / "circles.ipynb"
    nbformat.write(nb, path)
    module = notebooks.exported_module(path)
    assert module.startswith('"""Generated by `make sync` from circles.ipynb')
    assert module.index("def area") < module.index("UNIT = area(1.0)") and "print(area" not in module
    namespace = {}
    exec(compile(module, "circles.py", "exec"), namespace)
    assert namespace["UNIT"] == namespace["math"].pi


# ------------------------------------------------------------------------ the reader's hands
TAUGHT = [p for prefix in ("Part I:", "Part II:", "Part III:", "Part IV:", "Back") for p in part_chapters(prefix)]


@pytest.mark.parametrize("path", TAUGHT, ids=lambda p: p.name)
def test_no_chapter_shows_booktools_code_through_show_source(path):
    """Lesson code is written in the chapter's cells; show_source is for ext/ sources, CMake
    files and PyTorch's own code."""
    assert notebook_rules.booktools_code_shown(nbformat.read(path, as_version=4)) == []


def test_the_show_source_rule_bites():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("from booktools.source import show_source\nfrom booktools.training import fit, History as H\n"
                                  "import booktools.generated.resnet as rn"),
        nbformat.v4.new_code_cell('show_source("booktools/resnet.py", marker="x")'),
        nbformat.v4.new_code_cell("show_source(fit)\nshow_source(H)\nshow_source(rn.BasicBlock)"),
        nbformat.v4.new_code_cell('show_source("ext/csrc/autograd.cpp", marker="autograd")\nshow_source(torch.nn.Linear.forward)'),
    ])
    assert len(notebook_rules.booktools_code_shown(nb)) == 4


def test_exercise_labels_are_unique_in_the_book():
    labels = [label for p in NOTEBOOKS for label in notebook_rules.exercise_labels(nbformat.read(p, as_version=4))]
    assert sorted({x for x in labels if labels.count(x) > 1}) == []


def test_the_exercise_rules_bite():
    md = nbformat.v4.new_markdown_cell
    nb = nbformat.v4.new_notebook(cells=[
        md(":::{exercise}\n:label: ch-ex-a\n\nDo a.\n:::"),
        md("```{solution-start} ch-ex-a\n:class: dropdown\n```\nBecause."),
        nbformat.v4.new_code_cell("print(1)"),
        md("```{solution-end}\n```"),
        md(":::{exercise}\n:label: ch-ex-b\n\nDo b.\n:::"),                  # no solution
        md("```{solution-start} ch-ex-c\n```\nOpen, uncollapsed, no exercise."),
        md(":::{exercise}\n:label: other-ex-d\n\nWrong prefix.\n:::"),
    ])
    found = " | ".join(notebook_rules.exercise_problems(nb, "ch"))
    for expected in ["'ch-ex-c' follows no exercise", "'ch-ex-c' is not collapsed", "'ch-ex-c' is never closed",
                     "'ch-ex-b' has no worked solution", "'other-ex-d' has no worked solution",
                     "does not start with the chapter name"]:
        assert expected in found
    assert "'ch-ex-a'" not in found


CHECKERS_DIR = REPO_ROOT / "booktools" / "checkers"


@pytest.mark.parametrize("module", sorted(p.stem for p in CHECKERS_DIR.glob("*.py") if p.stem != "__init__"))
def test_every_checker_module_is_tested_and_used_by_its_chapter(module):
    """A checker is tested with wrong answers (tests/test_checkers_<chapter>.py) and called by
    the chapter's own solutions on the book's answer, so a checker that rejects a right answer
    fails nbval."""
    assert (REPO_ROOT / "tests" / f"test_checkers_{module}.py").exists()
    # Part IV's one checker module serves its six chapters; the others, the chapter of their name
    chapters = sorted(CHAPTERS_DIR.glob("sql_*.ipynb")) if module == "sql_problems" else [CHAPTERS_DIR / f"{module}.ipynb"]
    for chapter in chapters:
        sources = "\n".join(c.source for c in notebooks.code_cells(nbformat.read(chapter, as_version=4)))
        assert f"booktools.checkers.{module}" in sources or f"checkers import {module}" in sources, chapter.name


@pytest.mark.parametrize("path", [p for p in TAUGHT if p.stem != "setup"], ids=lambda p: p.name)
def test_every_taught_chapter_ends_with_exercises_that_have_worked_solutions(path):
    """Parts I-IV: exercises as sphinx-exercise blocks, each with its executed solution (the
    pairing itself is checked by notebook_rules.problems); no bare numbered list of exercises left."""
    import re

    nb = nbformat.read(path, as_version=4)
    assert len(notebook_rules.exercise_labels(nb)) >= 3
    for cell in nb.cells:
        if cell.cell_type == "markdown" and re.search(r"^#+ Exercises", cell.source, re.M):
            assert not re.search(r"^\s*1\. ", cell.source, re.M), "a numbered list of exercises without solutions"


def test_notebook_code_is_formatted_to_the_website_column():
    """Code cells are formatted (`make format`, ruff at 88 columns: the width of a code cell on
    the website at 1400x900), so they do not scroll sideways."""
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "format", "--check", "chapters"], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
