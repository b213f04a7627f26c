"""The benchmarks' charts (PNG, for docs/internals/performance.md), drawn from the figures of the run that printed them."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def bars(name: str, title: str, ylabel: str, series: dict[str, list[float]], labels: list[str], note: str) -> Path:
    """Grouped bars: one group per label, one bar per series (p50 and p99, say). Returns the file written."""
    figure, axes = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(series)
    for i, (serie, values) in enumerate(series.items()):
        positions = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        drawn = axes.bar(positions, values, width, label=serie if len(series) > 1 else None)
        axes.bar_label(drawn, labels=[f"{v:,.0f}" for v in values], fontsize=8)
    axes.set_xticks(range(len(labels)), labels, rotation=15, ha="right", fontsize=8)
    axes.set_ylabel(ylabel)
    if len(series) > 1:
        axes.legend()
    return save(figure, axes, name, title, note)


def lines(
    name: str,
    title: str,
    xlabel: str,
    ylabel: str,
    series: dict[str, tuple[list[float], list[float]]],
    note: str,
    annotate: bool = True,
) -> Path:
    """One line per series of (x, y) points (records/s by parallelism, say); `annotate` writes each point's value."""
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for serie, (xs, ys) in series.items():
        axes.plot(xs, ys, marker="o" if annotate else ".", label=serie)
        for x, y in zip(xs, ys) if annotate else []:
            axes.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.legend()
    return save(figure, axes, name, title, note)


def save(figure: Figure, axes: Axes, name: str, title: str, note: str) -> Path:
    axes.set_title(title, fontsize=11)
    axes.grid(axis="y", alpha=0.3)
    figure.text(0.01, 0.01, note, fontsize=7, color="dimgray")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    IMAGES.mkdir(parents=True, exist_ok=True)
    path = IMAGES / f"{name}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    print(f"chart: {path}", flush=True)
    return path
