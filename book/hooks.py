"""MkDocs hooks for the book: code includes from the repository, the skeletons'
TODOs, the worked examples and the figures, all made from the code at build
time so they cannot drift.

    <!-- todos 07 -->     the TODO comments of steps/step_07.py, with their line numbers
    <!-- example 07 -->   step 07's worked example, computed now (book/examples.py)
    --8<-- "solutions/solution_07.py"     (pymdownx.snippets) a file of the repository
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# MkDocs loads this file by its path: the book's modules are imported inside the hooks, once the repository
# is on sys.path.


def on_config(config):
    """Includes are resolved from the repository root, wherever the build runs."""
    config["mdx_configs"].setdefault("pymdownx.snippets", {})["base_path"] = [str(REPO)]
    return config


def on_pre_build(config):
    from book.figures import draw_all

    draw_all(Path(config["docs_dir"]) / "img" / "generated")


def todos(step: str) -> str:
    """The skeleton's TODO comment blocks as Markdown: where each is, and what it says."""
    path = REPO / "steps" / f"step_{step}.py"
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip().startswith("# TODO"):
            start, body = i + 1, []
            while i < len(lines) and lines[i].strip().startswith("#"):
                body.append(lines[i].strip()[1:].strip())
                i += 1
            blocks.append((start, body))
        else:
            i += 1
    out = []
    for n, (start, body) in enumerate(blocks, 1):
        out += [f"{n}. `steps/step_{step}.py` line {start}:", "", "    ```text"]
        out += [f"    {line}" for line in body]
        out += ["    ```", ""]
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files):
    from book.examples import example

    markdown = re.sub(r"<!-- example (\d\d) -->", lambda m: example(m.group(1)), markdown)
    return re.sub(r"<!-- todos (\d\d) -->", lambda m: todos(m.group(1)), markdown)
