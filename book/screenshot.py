"""`pixi run book-shot`: the step 07 page rendered in headless Chromium, looked at, and kept as a PNG.

    python -m book.screenshot                 build the book, render steps/07/, check it, save .cache/book-07.png
    python -m book.screenshot --page steps/02/ --out /tmp/02.png

The built site is served on 127.0.0.1 and loaded by Chromium (from Debian's
`chromium` package, or $CHROMIUM). The page passes when:
  - every file it asks the server for (pictures, stylesheets, scripts) is served, none missing;
  - the rendered page contains the included solution and the skeleton's TODO lines;
  - the screenshot shows each figure: the light-blue stage boxes of the shapes
    figure, and the dark purple of the heatmaps (viridis' low end), over enough pixels.
Takes about 5 s. Exit 0: passed; 1: a problem, named; 2: no browser or no book.
"""

from __future__ import annotations

import argparse
import functools
import html
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from runtime.paths import CACHE, REPO, shown

# PIL is imported inside the functions that use it: importing it takes seconds.

SITE = CACHE / "site"
WIDTH, HEIGHT = 1280, 8000
FLAGS = [  # headless as root on a machine with no outside network, and no background requests
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--hide-scrollbars",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# What each figure looks like on screen: (what, RGB, pixels at least). The stage boxes of
# book/figures_model.py are filled #e8f0fe; viridis' darkest colour fills most of a heatmap.
FIGURES = {
    "steps/07/": [("the shapes figure's stage boxes", (0xE8, 0xF0, 0xFE), 20_000),
                  ("the attention heatmaps", (0x44, 0x01, 0x54), 20_000)],
}
MUST_SAY = {
    "steps/07/": ["class GPT2MultiHeadAttention", "steps/step_07.py line", "pixi run s07"],
}


def find_browser() -> str | None:
    candidates = [os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"]
    return next((shutil.which(c) for c in candidates if c and shutil.which(c)), None)


class _Server(http.server.ThreadingHTTPServer):
    """Serves a folder and remembers the status of every path asked for."""

    def __init__(self, folder: Path):
        self.requests: list[tuple[str, int]] = []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_request(self, code="-", size="-"):
                server.requests.append((self.path.split("?")[0], int(code)))

        super().__init__(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))


def _chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


def matching_pixels(png: Path, rgb: tuple[int, int, int], tolerance: int = 6) -> int:
    """How many pixels of `png` are within `tolerance` of `rgb` on every channel."""
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB"), dtype=np.int16)
    return int((np.abs(pixels - np.array(rgb)) <= tolerance).all(axis=-1).sum())


def check_page(site: Path, page: str, png: Path, browser: str) -> list[str]:
    """Renders `page` of the built `site` into `png`; the problems found (none: it passed)."""
    server = _Server(site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
    problems = []
    try:
        with tempfile.TemporaryDirectory() as profile:
            dom = _chromium(browser, Path(profile), "--virtual-time-budget=5000", "--dump-dom", url).stdout
            shot = _chromium(browser, Path(profile), f"--window-size={WIDTH},{HEIGHT}",
                             "--virtual-time-budget=5000", f"--screenshot={png}", url)
    finally:
        server.shutdown()
        server.server_close()
    if not png.exists():
        return [f"Chromium wrote no screenshot: {shot.stderr.strip()[-500:]}"]
    missing = sorted({path for path, code in server.requests if code >= 400})
    problems += [f"the page asked for {path}, which the site does not have" for path in missing]
    text = html.unescape(re.sub(r"<[^>]+>", "", dom))  # what the page says, without its markup
    problems += [f"the rendered page lacks {said!r}" for said in MUST_SAY.get(page, []) if said not in text]
    for what, rgb, least in FIGURES.get(page, []):
        if (found := matching_pixels(png, rgb)) < least:
            problems.append(f"{what} do not show: {found} pixels of #{bytes(rgb).hex()} (want >= {least})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m book.screenshot", description=__doc__.split("\n")[0])
    parser.add_argument("--page", default="steps/07/", help="the page, as its folder in the site (steps/07/)")
    parser.add_argument("--out", type=Path, default=None, help="where to save the PNG (.cache/book-07.png)")
    parser.add_argument("--site", type=Path, default=None, help="an already built site (default: build the book)")
    args = parser.parse_args(argv)
    if (browser := find_browser()) is None:
        print("No Chromium found: install Debian's `chromium` package (apt-get install chromium) or set "
              "CHROMIUM to a Chrome/Chromium binary.", file=sys.stderr)
        return 2
    site = args.site or SITE
    if args.site is None:
        built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f",
                                str(REPO / "book" / "mkdocs.yml")], cwd=REPO,
                               env=os.environ | {"NO_MKDOCS_2_WARNING": "1"})
        if built.returncode != 0:
            return 2
    if not (site / args.page / "index.html").exists():
        print(f"No page {args.page} in {shown(site)}.", file=sys.stderr)
        return 2
    name = args.page.strip("/").replace("/", "-").removeprefix("steps-")
    png = args.out or CACHE / f"book-{name}.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    problems = check_page(site, args.page, png, browser)
    for problem in problems:
        print(f"FAIL {problem}")
    if not problems:
        print(f"ok   {args.page} rendered in {Path(browser).name} at {WIDTH}x{HEIGHT}: every file served, "
              f"the solution and TODOs on the page, each figure on screen")
    if png.exists():
        print(f"Screenshot: {shown(png)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
