"""What every figure of the book's is drawn with: matplotlib's pyplot, headless, and the one way a figure is
written out."""

from __future__ import annotations

from pathlib import Path

# matplotlib is imported inside the functions that use it: importing it takes seconds.


def pyplot():
    """matplotlib's pyplot, on the Agg backend: no display is needed at build time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: Path) -> None:
    """Lays the figure out, writes it to `path` and frees it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
