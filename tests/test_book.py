"""The book builds in strict mode (every include resolves, no broken link), has
a page per step made from the code, and names only things that exist."""

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from functools import cache

import pytest

from runtime.paths import REPO

BOOK = REPO / "book"
PAGES = sorted((BOOK / "docs").rglob("*.md"))
TASKS = set(tomllib.loads((REPO / "pixi.toml").read_text())["tasks"])


def _build(config, site):
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(site)})


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The book built in strict mode, once for the tests that read it (~20 s a build)."""
    site = tmp_path_factory.mktemp("book") / "site"
    done = _build(BOOK / "mkdocs.yml", site)
    assert done.returncode == 0, done.stderr
    return site


def test_book_builds_strict(site):
    page = (site / "steps" / "07" / "index.html").read_text()
    assert "_split_heads" in page and "steps/step_07.py</code> line" in page  # solution and TODOs included
    assert (site / "img" / "generated" / "attention-shapes.svg").exists()


@pytest.mark.slow  # a whole book built to fail: ~12 s
def test_a_broken_include_fails_the_build(tmp_path):
    copy = tmp_path / "book"
    shutil.copytree(BOOK / "docs", copy / "docs", ignore=shutil.ignore_patterns("generated"))
    config = (BOOK / "mkdocs.yml").read_text().replace("  - hooks.py", f"  - {BOOK / 'hooks.py'}")
    (copy / "mkdocs.yml").write_text(config)
    page = copy / "docs" / "steps" / "05.md"
    page.write_text(page.read_text().replace("solutions/solution_05.py\"", "solutions/solution_99.py\""))
    done = _build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "solution_99.py" in done.stderr


def test_every_step_has_a_page_that_teaches_it():
    """Why, the maths, a worked example computed at build time, a figure, pitfalls, questions with folded
    answers, the TODOs, the check and the solution."""
    for n in range(1, 14):
        text = (BOOK / "docs" / "steps" / f"{n:02d}.md").read_text()
        assert f"<!-- todos {n:02d} -->" in text and f'--8<-- "solutions/solution_{n:02d}.py"' in text
        assert f"pixi run s{n:02d}" in text
        assert f"<!-- example {n:02d} -->" in text and "![" in text and "img/generated/" in text
        assert "## Why" in text and "## Pitfalls" in text and text.count('??? question "') >= 2


def test_worked_examples_are_computed_when_the_book_builds(site):
    """The numbers on the page are what book/examples.py computes now (no example is typed in)."""
    from book.examples import attention_example, example

    page = (site / "steps" / "07" / "index.html").read_text()
    weights = attention_example()["weights"]
    assert f"{weights[2, 1]:.2f}" in page and f"{weights[3, 1]:.2f}" in page
    for n in range(1, 14):
        assert example(f"{n:02d}").count("```text") >= 1


@cache  # read once for every page
def _defined(online_book: bool = False) -> frozenset[str]:
    """Every class, function, method and class field in the solutions, steps, checker, runtime, explore and gpt2;
    with `online_book`, also in the online book's files as tests/book and tests/book_feb hold them (the
    page that compares the two names the book's)."""
    names = set()
    book_files = [*REPO.glob("tests/book/*.py"), *REPO.glob("tests/book_feb/*.py")] if online_book else []
    for path in [*REPO.glob("solutions/*.py"), *REPO.glob("checker/**/*.py"), *REPO.glob("explore/*.py"),
                 *REPO.glob("gpt2/*.py"), *REPO.glob("runtime/*.py"), *book_files]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                names.add(node.name)
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef):
                            names.add(f"{node.name}.{item.name}")
    return frozenset(names)


@cache
def _max_names() -> frozenset[str]:
    """What MAX, Hugging Face's GPT-2 and Python's builtins define, which the book names too."""
    import builtins

    from max import graph
    from max.experimental import functional as F
    from max.experimental import nn
    from max.experimental.tensor import Tensor
    from max.nn import attention, kernels, kv_cache  # step 14's paged-cache operations and mask variants
    from max.pipelines import lib as pipelines
    from transformers import pytorch_utils
    from transformers.models.gpt2 import modeling_gpt2

    return frozenset({
        *dir(nn), "Tensor", *(f"F.{n}" for n in dir(F)), *dir(F), *(f"Tensor.{n}" for n in dir(Tensor)),
        *dir(Tensor), *dir(kv_cache), *(n for n in dir(pipelines) if n[0].isupper()),
        *(n for n in dir(modeling_gpt2) if n.startswith("GPT2")), *(n for n in dir(graph) if n[0].isupper()),
        *(n for n in dir(pytorch_utils) if n[0].isupper()), *dir(kernels), *dir(attention), *dir(builtins)})


def unknown_names(text: str, defined: set[str], max_names: set[str]) -> list[str]:
    """What `text` (Markdown) names in backticks that does not exist: files, tasks, modules, classes, functions."""
    bad = []
    for code in re.findall(r"`([^`\n]+)`", text):
        if m := re.match(r"pixi run (\S+)", code):
            if m.group(1) not in TASKS and "NN" not in m.group(1):
                bad.append(code)
        elif m := re.match(r"python -m (\S+)", code):
            if importlib.util.find_spec(m.group(1)) is None:
                bad.append(code)
        elif re.fullmatch(r"[\w./-]+\.(py|toml|md|txt|yml)", code) or re.fullmatch(r"[\w-]+/[\w./-]*", code):
            generated = code.split("/")[0] in ("weights", "out", ".cache")  # made when the course runs
            if ("NN" not in code and not generated and (REPO / code.split("/")[0]).exists()
                    and not (REPO / code).exists()):
                bad.append(code)
        elif re.fullmatch(r"F\.\w+", code):
            if code not in max_names:
                bad.append(code)
        elif re.fullmatch(r"[A-Z][A-Za-z0-9]+(\.\w+)?", code):
            if code not in defined and code not in max_names and code.split(".")[0] not in max_names:
                bad.append(code)
        elif m := re.fullmatch(r"(\w+)\(.*\)", code):
            if m.group(1) not in defined and m.group(1) not in max_names and m.group(1) not in {
                    n.split(".")[-1] for n in defined} | {"Linear", "np.argmax"}:
                bad.append(code)
    return bad


# Names of earlier MAX releases that a page names as such ("X replaced Y")
EARLIER_MAX = {"online-book.md": {"KVCacheInputsInterface"}}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(BOOK)) for p in PAGES])
def test_page_names_only_what_exists(page):
    known = _max_names() | EARLIER_MAX.get(page.name, set())
    assert unknown_names(page.read_text(), _defined(online_book=page.name == "online-book.md"), known) == []


def test_the_name_check_catches_a_wrong_page():
    wrong = ("Run `pixi run s19`, edit `steps/step_19.py`, call `F.not_an_op`, subclass `GPT2Nope`, "
             "use `GPT2MultiHeadAttention._missing`, `python -m checker.nothing`, then `causal_masks(3, 0)`.")
    assert unknown_names(wrong, _defined(), _max_names()) == [
        "pixi run s19", "steps/step_19.py", "F.not_an_op", "GPT2Nope", "GPT2MultiHeadAttention._missing",
        "python -m checker.nothing", "causal_masks(3, 0)"]


def _browser():
    from book.screenshot import find_browser

    browser = find_browser()
    if browser is None:
        if os.environ.get("BOOK_BROWSER") == "required":  # set by .ci/run, which installs Chromium
            pytest.fail("BOOK_BROWSER=required but no Chromium found")
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    return browser


def test_step07_page_renders_in_a_browser(site, tmp_path):
    from book.screenshot import check_page

    png = tmp_path / "07.png"
    assert check_page(site, "steps/07/", png, _browser()) == []
    assert png.stat().st_size > 100_000


@pytest.mark.slow  # a book built and rendered in Chromium: ~30 s
def test_the_render_check_fails_when_a_figure_is_missing(tmp_path):
    from book.screenshot import check_page

    site = tmp_path / "site"
    assert _build(BOOK / "mkdocs.yml", site).returncode == 0
    (site / "img" / "generated" / "attention-shapes.svg").unlink()
    (site / "img" / "heads-synthetic-layer0.png").write_bytes(b"not a picture")
    problems = check_page(site, "steps/07/", tmp_path / "07.png", _browser())
    assert any("attention-shapes.svg, which the site does not have" in p for p in problems), problems
    assert any("stage boxes do not show" in p for p in problems), problems
    assert any("heatmaps do not show" in p for p in problems), problems
