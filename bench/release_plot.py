"""The release bench's picture: six panels of every release's series against seconds from the release."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def plot(results: list[dict[str, Any]], path: Path) -> Path | str:
    """Six panels against seconds from the release: runs final (share of N), runs final a second, POST /runs
    refusals, RSS, threads, and the slowest /healthz of each second. Without matplotlib, the line saying so: a
    release's figures (printed and in --series) are not lost for want of its picture."""
    try:
        import matplotlib
    except ImportError:
        return "none: matplotlib is missing (pip install -e '.[bench]'); --replot draws it from --series"

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 2, figsize=(11, 10))
    health = axes[2][1]
    panels: list[tuple[Any, str, Callable[[dict[str, Any], dict[str, Any]], float]]] = [
              (axes[0][0], "runs final (share of N)", lambda p, r: p["final"] / r["runs"]),
              (axes[0][1], "runs final a second (over 10 s)", lambda p, r: p.get("final_per_s", 0.0)),
              (axes[1][0], "POST /runs refused (503 + Retry-After), so far", lambda p, r: p["refused"]),
              (axes[1][1], "serve RSS (MiB)", lambda p, r: p["rss_mib"]),
              (axes[2][0], "serve threads", lambda p, r: p["threads"]),
              (health, "slowest GET /healthz begun in the second (ms)", lambda p, r: p["healthz_ms"])]
    for ax, title, value in panels:
        for r in results:
            # A second in which no /healthz began (one still under way) has none: no point.
            points = [p for p in r["series"] if ax is not health or p["healthz_ms"] > 0]
            ax.plot([p["t_s"] for p in points], [value(p, r) for p in points], linewidth=1,
                    marker="." if ax is health else "", markersize=2, linestyle=":" if ax is health else "-",
                    label=f"{r['runs']:,} runs, {r['layout']} address{'es' if r['layout'] == 'own' else ''}")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("seconds from the release")
        ax.grid(True, alpha=0.3)
    health.set_yscale("log")
    health.axhline(100, color="grey", linestyle=":", linewidth=1)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("A release of one-Turn runs through jr2-actors serve (the fake cluster in its own process)",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
