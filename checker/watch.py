"""`pixi run watch`: the first unfinished step, re-checked each time you save a file in steps/.

    python -m checker.watch          (Ctrl-C stops)

The screen shows that step's check, a progress bar, and what to run for a
hint. When the step passes, it moves on to the next unfinished one. Verdicts
come from the cache while nothing a step depends on changed (checker.harness.verdicts),
so only what you touched is checked again. Files are watched with watchdog
(inotify on Linux), not by polling.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

import runtime
from checker.harness import verdicts
from checker.progress import STEPS as ALL_STEPS
from checker.progress import bar, statuses
from runtime.checkpoints import checkpoint_for_command
from runtime.paths import STEPS, step_file

# watchdog is imported inside the functions that use it: importing it takes seconds.

CLEAR = "\033[2J\033[H"
SETTLE = 0.3  # seconds to wait after a save: editors write a file in several events


class Saved:
    """Set when a .py file in steps/ is written, created or moved into place."""

    def __init__(self):
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        self.event = threading.Event()
        saved = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event):
                target = getattr(event, "dest_path", "") or event.src_path
                if event.event_type in ("modified", "created", "moved", "closed") and str(target).endswith(".py"):
                    saved.event.set()

        self.observer = Observer()
        self.observer.schedule(Handler(), str(STEPS), recursive=False)
        self.observer.start()

    def wait(self) -> None:
        self.event.wait()
        time.sleep(SETTLE)
        self.event.clear()


def first_unfinished(checkpoint) -> str | None:
    """The first step without a passing verdict in the cache (it may have none yet)."""
    for step in ALL_STEPS:
        entry = verdicts.lookup(step, step_file(step), checkpoint)
        if entry is None or not entry["ok"]:
            return step
    return None


def show(step: str, checkpoint, note: str) -> bool:
    """Clears the screen, checks `step` (its report straight to the terminal), shows the progress; True if it passes."""
    print(CLEAR + f"pixi run watch: step {step}, checked again whenever you save a file in steps/ "
          f"(Ctrl-C stops).{' ' + note if note else ''}\n", flush=True)
    subprocess.run([sys.executable, "-m", "checker", step], env=os.environ)
    done = sum(1 for st in statuses(checkpoint, run=False).values() if st and st[0] == "pass")
    entry = verdicts.lookup(step, step_file(step), checkpoint)
    print(f"\n{bar(done)}")
    if entry and entry["ok"]:
        return True
    print(f"Stuck? pixi run s{step} --hint (again for the next one)   Start over: pixi run reset {step}", flush=True)
    return False


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m checker.watch", description=__doc__.split("\n\n")[0]).parse_args(argv)

    runtime.setup()

    if (checkpoint := checkpoint_for_command()) is None:
        return 2
    saved = Saved()
    note = ""
    try:
        while True:
            step = first_unfinished(checkpoint)
            if step is None:
                print(CLEAR + f"{bar(len(ALL_STEPS))}\nEvery step passes. Your GPT-2 writes: pixi run gpt2 "
                      "\"The meaning of life is\" --compare\n(watching steps/ still; Ctrl-C stops)", flush=True)
            elif show(step, checkpoint, note):
                note = f"Step {step} passes: on to the next one."
                continue
            note = ""
            saved.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        saved.observer.stop()


if __name__ == "__main__":
    sys.exit(main())
