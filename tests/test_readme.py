"""The README holds only what runs: every `pixi run` names a task of pixi.toml, every `python -m` a module
that exists (the course's own answer `--help`, and know every option the README gives them), every relative
link a file that exists and every #anchor a heading of it; and it stays a page read in five minutes."""

import importlib.machinery
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from markdown.extensions.toc import slugify

from tests.conftest import child_env

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
TASKS = tomllib.loads((REPO / "pixi.toml").read_text())["tasks"]
MAX_LINES = 120
COMMAND = re.compile(r"(pixi run|python -m)\s+([\w.-]+)(.*)")


def _prose(text: str) -> str:
    """`text` without its fenced blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def commands(text: str) -> list[tuple[str, str, list[str]]]:
    """Every command the Markdown `text` gives, in code spans and in fenced blocks (a `# comment` may hold
    another): ("pixi run", task, options) or ("python -m", module, options)."""
    snippets = re.findall(r"`([^`\n]+)`", _prose(text))
    for block in re.findall(r"^```\w*\n(.*?)^```", text, flags=re.S | re.M):
        snippets += block.splitlines()
    found = []
    for snippet in snippets:
        for part in re.split(r"#|;|&&", snippet):
            if m := COMMAND.search(part):
                found.append((m[1], m[2], re.findall(r"(?<!\S)--[\w-]+", m[3])))
    return found


def module_spec(name: str):
    """The spec of module `name`, found without importing it or its packages (a package's __init__ may
    import MAX)."""
    top, *rest = name.split(".")
    spec = importlib.util.find_spec(top)
    for part in rest:
        if spec is None or spec.submodule_search_locations is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(f"{spec.name}.{part}", spec.submodule_search_locations)
    return spec


def runnable(name: str) -> bool:
    """`python -m name` has something to run: a module, or a package with a __main__."""
    spec = module_spec(name)
    return spec is not None and (spec.submodule_search_locations is None or module_spec(f"{name}.__main__") is not None)


def own(name: str) -> bool:
    """The module is the course's (in this repository), not an installed package's."""
    spec = module_spec(name)
    return spec is not None and spec.origin is not None and Path(spec.origin).is_relative_to(REPO)


def task_module(task: str) -> str | None:
    """The module a pixi task runs (`python -m X ...`), if it runs one."""
    m = re.match(r"python -m ([\w.]+)", TASKS[task]) if task in TASKS else None
    return m[1] if m else None


def unknown_tasks(text: str) -> list[str]:
    return [task for kind, task, _ in commands(text) if kind == "pixi run" and task not in TASKS]


def missing_modules(text: str) -> list[str]:
    return [module for kind, module, _ in commands(text) if kind == "python -m" and not runnable(module)]


def options_by_module(text: str) -> dict[str, set[str]]:
    """Each of the course's modules the README runs (itself or through a pixi task), with the options it
    gives it."""
    modules = {}
    for kind, name, options in commands(text):
        module = name if kind == "python -m" else task_module(name)
        if module and runnable(module) and own(module):
            modules.setdefault(module, set()).update(options)
    return modules


def unknown_options(options: dict[str, set[str]], helps: dict[str, str]) -> list[str]:
    """Options the README gives a module that its --help does not name."""
    return [f"{module} {option}" for module, given in options.items() for option in sorted(given)
            if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", helps[module])]


def anchors(markdown: str) -> set[str]:
    """The ids MkDocs gives the headings of a page (Python-Markdown's toc: slugify, then _1, _2 for
    repeats)."""
    ids = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", _prose(markdown), flags=re.M):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
        slug = base = slugify(text, "-")
        n = 0
        while slug in ids:
            n += 1
            slug = f"{base}_{n}"
        ids.add(slug)
    return ids


def broken_links(text: str, folder: Path = REPO, page: Path = README) -> list[str]:
    """Relative links of `text` (a page in `folder`) to a file that does not exist, or to an anchor that is
    not a heading of the page it points at."""
    bad = []
    for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)[^)]*\)", _prose(text)):
        if re.match(r"[a-z][\w+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (folder / path) if path else page
        if not file.exists():
            bad.append(target)
        elif anchor and file.suffix == ".md":
            markdown = text if file == page else file.read_text()
            if anchor not in anchors(markdown):
                bad.append(target)
    return bad


def test_every_pixi_task_the_readme_runs_exists():
    assert unknown_tasks(README.read_text()) == [], "not tasks of pixi.toml"


def test_every_module_the_readme_runs_exists():
    assert missing_modules(README.read_text()) == [], "no such module (or a package without __main__)"


def test_the_courses_commands_answer_help_and_know_the_readmes_options():
    """Each of the course's modules the README runs, `--help` in a child process (all at once, on the
    synthetic checkpoint): exit 0, and every option the README gives it is in its usage."""
    modules = options_by_module(README.read_text())
    assert {"checker", "gpt2", "gpt2_arch"} <= set(modules), modules
    env = {**child_env(), "GPT2_WEIGHTS": "synthetic"}
    running = {module: subprocess.Popen([sys.executable, "-m", module, "--help"], cwd=REPO, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
               for module in modules}
    helps, failed = {}, []
    for module, process in running.items():
        try:
            helps[module] = process.communicate(timeout=120)[0]
        except subprocess.TimeoutExpired:
            process.kill()
            helps[module] = process.communicate()[0]
        if process.returncode != 0:
            failed.append(f"python -m {module} --help: exit {process.returncode}\n{helps[module][-2000:]}")
    assert not failed, "\n".join(failed)
    assert unknown_options(modules, helps) == [], "options the README gives that --help does not name"


def test_every_relative_link_of_the_readme_resolves():
    assert broken_links(README.read_text()) == [], "links to no file, or to no heading of it"


def test_the_readme_is_a_short_page():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines; the details belong in book/docs/"


def test_a_wrong_readme_is_caught():
    """Each check above fails on a README that is wrong in its way."""
    wrong = README.read_text() + (
        "\n`pixi run s99` and `pixi run watch --hnt`, `python -m checker.nothing`, `python -m runtime.paths`\n"
        "```sh\npython -m gpt2 \"Hi\" --comapre      # or: pixi run gpt3\n```\n"
        "[a](book/docs/nothing.md), [b](book/docs/setup.md#no-such-heading), [c](#no-such-heading), "
        "[d](book/docs/setup.md#commands), [e](https://example.com/x.md)\n")
    assert unknown_tasks(wrong) == ["s99", "gpt3"]
    assert missing_modules(wrong) == ["checker.nothing"]
    assert broken_links(wrong) == ["book/docs/nothing.md", "book/docs/setup.md#no-such-heading", "#no-such-heading"]
    options = options_by_module(wrong)
    helps = {module: " ".join(sorted(given - {"--hnt", "--comapre"})) for module, given in options.items()}
    assert unknown_options(options, helps) == ["checker.watch --hnt", "gpt2 --comapre"]
    assert len((wrong + "\n" * MAX_LINES).splitlines()) > MAX_LINES
