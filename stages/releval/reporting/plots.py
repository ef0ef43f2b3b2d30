"""Plots of a scored grid: Vega-Lite specs, DVC templates and PNGs.

Four plots, each first a plain table (a list of JSON-safe rows, computed by
:mod:`releval.measurement.plot_tables`) that is written as a DVC plot data file, then drawn two
ways: a Vega-Lite spec (for `dvc plots show` through the templates in dvc_plots/templates/) and a
PNG (matplotlib, Agg canvas, no display needed), which report.html embeds
(:mod:`releval.reporting.report_html`):

``difference_ci``    each configuration's paired difference from the baseline on the primary
                     metric with its bootstrap interval, coloured by the grid's verdict (the
                     quantity the verdict is about)
``recall_curve``     recall@k for k = 1..100 per configuration, from the runs themselves
``quality_cost``     the primary metric against cost: index size
``difference_hist``  per-query differences, candidate − baseline, one histogram per candidate

Titles and axis labels are words (:func:`plot_title`), never a plot's file name.

Pure: tables and dicts in, specs, bytes and text out; nothing here computes a figure; the stage
writes the files.

`dvc plots show` loads Vega from a CDN by default. dvc_plots/offline.html is an HTML template
with Vega, Vega-Lite and Vega-Embed inlined (:func:`offline_template`), so the page DVC writes
renders without a network.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from releval import paths
from releval.errors import InputError
from releval.io import write_text

PLOTS = ("difference_ci", "recall_curve", "quality_cost", "difference_hist")
TEMPLATES = {
    "difference_ci": "interval_by_config",
    "recall_curve": "lines_by_config",
    "quality_cost": "scatter_by_config",
    "difference_hist": "histogram_by_config",
}
VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
# The JavaScript inlined into dvc_plots/offline.html (npm packages; see dvc_plots/README.md).
VENDORED = {"vega": "5.33.1", "vega-lite": "5.23.0", "vega-embed": "6.29.0"}
PLACEHOLDERS = ("{plot_divs}", "{refresh_tag}")
# One colour per verdict, in the plots and on the page (releval.measurement.stats.Verdict).
VERDICT_COLOURS = {
    "improvement": "#1a7f37",
    "regression": "#cf222e",
    "inconclusive": "#6e7781",
    "coverage-confounded": "#b35900",
    "too few queries": "#8250df",
}
BASELINE_COLOUR = "#111111"


def plot_title(name: str, metric: str, baseline: str, confidence: float = 0.95) -> str:
    """A plot's title, in words: what is drawn, of what, against what."""
    titles = {
        "difference_ci": f"{metric} difference from {baseline}, paired, {confidence:.0%} bootstrap interval",
        "recall_curve": "Recall@k for k = 1 to 100, per configuration",
        "quality_cost": f"{metric} against index size",
        "difference_hist": f"Per-query {metric} difference from {baseline}",
    }
    if name not in titles:
        raise InputError(f"unknown plot {name!r}; known: {', '.join(PLOTS)}", field="plot")
    return titles[name]


def _confidence(rows: Sequence[Mapping[str, Any]]) -> float:
    return float(rows[0].get("confidence", 0.95)) if rows else 0.95


# --------------------------------------------------------------------------- Vega-Lite


def _title(text: str) -> dict[str, Any]:
    return {"text": text, "anchor": "start"}


def vega_specs(tables: Mapping[str, list[dict[str, Any]]], metric: str, baseline: str) -> dict[str, dict[str, Any]]:
    """Self-contained Vega-Lite specs (data inlined) for the four plots."""
    specs = {}
    if "difference_ci" in tables:
        rows = tables["difference_ci"]
        order = [r["config_id"] for r in rows]
        y = {"field": "config_id", "type": "nominal", "sort": order, "title": None}
        colour = {
            "field": "verdict",
            "type": "nominal",
            "title": "verdict",
            "scale": {"domain": list(VERDICT_COLOURS), "range": list(VERDICT_COLOURS.values())},
        }
        specs["difference_ci"] = {
            "$schema": VEGA_LITE_SCHEMA,
            "title": _title(plot_title("difference_ci", metric, baseline, _confidence(rows))),
            "data": {"values": rows},
            "width": 420,
            "layer": [
                {"mark": {"type": "rule", "color": BASELINE_COLOUR}, "encoding": {"x": {"datum": 0}}},
                {
                    "mark": {"type": "rule", "strokeWidth": 2},
                    "encoding": {
                        "y": y,
                        "x": {
                            "field": "low",
                            "type": "quantitative",
                            "title": f"{metric} difference (configuration − {baseline})",
                        },
                        "x2": {"field": "high"},
                        "color": colour,
                    },
                },
                {
                    "mark": {"type": "point", "filled": True, "size": 70},
                    "encoding": {
                        "y": y,
                        "x": {"field": "difference", "type": "quantitative"},
                        "color": colour,
                        "tooltip": [
                            {"field": f} for f in ("config_id", "difference", "low", "high", "p_holm", "verdict")
                        ],
                    },
                },
            ],
        }
    if "recall_curve" in tables:
        specs["recall_curve"] = {
            "$schema": VEGA_LITE_SCHEMA,
            "title": _title(plot_title("recall_curve", metric, baseline)),
            "data": {"values": tables["recall_curve"]},
            "width": 420,
            "height": 280,
            "mark": {"type": "line"},
            "encoding": {
                "x": {"field": "k", "type": "quantitative", "title": "k (documents)"},
                "y": {"field": "recall", "type": "quantitative", "title": "recall@k", "scale": {"domain": [0, 1]}},
                "color": {"field": "config_id", "type": "nominal", "title": "configuration"},
                "tooltip": [{"field": "config_id"}, {"field": "k"}, {"field": "recall"}],
            },
        }
    if "quality_cost" in tables:
        values = tables["quality_cost"]

        def panel(x: str, title: str) -> dict[str, Any]:
            return {
                "mark": {"type": "point", "filled": True, "size": 80},
                "transform": [{"filter": f"isValid(datum['{x}'])"}],
                "width": 260,
                "height": 220,
                "encoding": {
                    "x": {"field": x, "type": "quantitative", "title": title},
                    "y": {"field": "quality", "type": "quantitative", "title": metric, "scale": {"zero": False}},
                    "color": {"field": "config_id", "type": "nominal", "title": "configuration"},
                    "tooltip": [{"field": f} for f in ("config_id", "quality", x)],
                },
            }

        specs["quality_cost"] = {
            "$schema": VEGA_LITE_SCHEMA,
            "title": _title(plot_title("quality_cost", metric, baseline)),
            "data": {"values": values},
            # Cost figures only: throughput and latency depend on the machine (reports/ops.json).
            "hconcat": [panel("index_mb", "index size (MB)")],
        }
    if "difference_hist" in tables:
        specs["difference_hist"] = {
            "$schema": VEGA_LITE_SCHEMA,
            "title": _title(plot_title("difference_hist", metric, baseline)),
            "data": {"values": tables["difference_hist"]},
            "facet": {"row": {"field": "config_id", "type": "nominal", "title": None}},
            "spec": {
                "width": 420,
                "height": 90,
                "mark": {"type": "bar"},
                "encoding": {
                    "x": {
                        "field": "difference",
                        "type": "quantitative",
                        "bin": {"maxbins": 30},
                        "title": f"{metric} difference (configuration − {baseline})",
                    },
                    "y": {"aggregate": "count", "type": "quantitative", "title": "queries"},
                },
            },
        }
    return specs


def dvc_templates() -> dict[str, dict[str, Any]]:
    """The Vega-Lite templates dvc_plots/templates/*.json hold, with DVC's anchors.

    DVC fills ``<DVC_METRIC_DATA>`` (every row, plus ``rev``), the title, x/y fields and labels.
    Fields that a plot needs besides x and y (``low``, ``high``, ``config_id``) are fixed names
    of the data files this module writes. Several revisions (`dvc plots diff`) are told apart
    by stroke dash, shape or offset.
    """
    data = {"values": "<DVC_METRIC_DATA>"}
    title = {"text": "<DVC_METRIC_TITLE>", "anchor": "start"}
    x = {"field": "<DVC_METRIC_X>", "title": "<DVC_METRIC_X_LABEL>"}
    y = {"field": "<DVC_METRIC_Y>", "title": "<DVC_METRIC_Y_LABEL>"}
    return {
        "interval_by_config": {
            "$schema": VEGA_LITE_SCHEMA,
            "data": data,
            "title": title,
            "width": 420,
            "layer": [
                {
                    "mark": {"type": "rule", "strokeWidth": 2},
                    "encoding": {
                        "y": {**x, "type": "nominal"},
                        "yOffset": {"field": "rev"},
                        "x": {
                            "field": "low",
                            "type": "quantitative",
                            "title": "<DVC_METRIC_Y_LABEL>",
                            "scale": {"zero": False},
                        },
                        "x2": {"field": "high"},
                        "color": {"field": "rev", "type": "nominal"},
                    },
                },
                {
                    "mark": {"type": "point", "filled": True, "size": 70},
                    "encoding": {
                        "y": {**x, "type": "nominal"},
                        "yOffset": {"field": "rev"},
                        "x": {**y, "type": "quantitative"},
                        "color": {"field": "rev", "type": "nominal"},
                        "tooltip": [
                            {"field": "config_id"},
                            {"field": "rev"},
                            {"field": "<DVC_METRIC_Y>"},
                            {"field": "low"},
                            {"field": "high"},
                        ],
                    },
                },
            ],
        },
        "lines_by_config": {
            "$schema": VEGA_LITE_SCHEMA,
            "data": data,
            "title": title,
            "width": 420,
            "height": 280,
            "mark": {"type": "line"},
            "encoding": {
                "x": {**x, "type": "quantitative"},
                "y": {**y, "type": "quantitative"},
                "color": {"field": "config_id", "type": "nominal", "title": "configuration"},
                "strokeDash": {"field": "rev", "type": "nominal"},
                "tooltip": [
                    {"field": "config_id"},
                    {"field": "rev"},
                    {"field": "<DVC_METRIC_X>"},
                    {"field": "<DVC_METRIC_Y>"},
                ],
            },
        },
        "scatter_by_config": {
            "$schema": VEGA_LITE_SCHEMA,
            "data": data,
            "title": title,
            "width": 420,
            "height": 280,
            "mark": {"type": "point", "filled": True, "size": 80},
            "encoding": {
                "x": {**x, "type": "quantitative"},
                "y": {**y, "type": "quantitative", "scale": {"zero": False}},
                "color": {"field": "config_id", "type": "nominal", "title": "configuration"},
                "shape": {"field": "rev", "type": "nominal"},
                "tooltip": [
                    {"field": "config_id"},
                    {"field": "rev"},
                    {"field": "<DVC_METRIC_X>"},
                    {"field": "<DVC_METRIC_Y>"},
                ],
            },
        },
        "histogram_by_config": {
            "$schema": VEGA_LITE_SCHEMA,
            "data": data,
            "title": title,
            "facet": {"row": {"field": "config_id", "type": "nominal", "title": None}},
            "spec": {
                "width": 420,
                "height": 90,
                "mark": {"type": "bar", "opacity": 0.7},
                "encoding": {
                    "x": {**x, "type": "quantitative", "bin": {"maxbins": 30}},
                    "y": {"aggregate": "count", "type": "quantitative", "title": "queries"},
                    "color": {"field": "rev", "type": "nominal"},
                },
            },
        },
    }


def dvc_plot_definitions(plots_dir: str = paths.PLOTS, templates_dir: str = paths.PLOT_TEMPLATES) -> list[dict]:
    """The top-level ``plots:`` entries of dvc.yaml for the four data files."""
    spec = {
        "difference_ci": (
            "config_id",
            "difference",
            "configuration",
            "primary metric difference (configuration − baseline)",
            "paired difference from the baseline, 95% bootstrap interval",
        ),
        "recall_curve": ("k", "recall", "k (documents)", "recall@k", "recall@k per configuration"),
        "quality_cost": ("index_mb", "quality", "index size (MB)", "primary metric", "quality against index size"),
        "difference_hist": (
            "difference",
            "difference",
            "candidate − baseline",
            None,
            "per-query difference against the baseline",
        ),
    }
    out = []
    for name in PLOTS:
        x, y, x_label, y_label, title = spec[name]
        entry = {
            "template": f"{templates_dir}/{TEMPLATES[name]}.json",
            "x": x,
            "y": {f"{plots_dir}/{name}.json": y},
            "title": title,
            "x_label": x_label,
        }
        if y_label:
            entry["y_label"] = y_label
        out.append({name: entry})
    return out


# --------------------------------------------------------------------------- PNG (matplotlib)


def _figure(width: float, height: float):
    # matplotlib takes 0.6 s to import: only a PNG pays it (the audit and report.md's renderers import this module)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def _palette(names: Sequence[str]) -> dict[str, Any]:
    """One colour per configuration, the same in every panel."""
    from matplotlib import colormaps  # as in _figure: only a PNG pays for matplotlib

    colours = colormaps["tab10"].colors + colormaps["Dark2"].colors
    return {name: colours[i % len(colours)] for i, name in enumerate(names)}


def _png(figure) -> bytes:
    """The figure as a PNG of at most 256 colours (a third of the full-colour file's size: report.html
    embeds every plot), no dithering, so the same figure gives the same bytes."""
    from PIL import Image  # matplotlib's own dependency

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    palette = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    palette.save(out, format="PNG", optimize=True)
    return out.getvalue()


def render_png(name: str, rows: list[dict[str, Any]], metric: str, baseline: str) -> bytes:
    """One plot as PNG bytes (matplotlib's Agg canvas: no display, no global pyplot state)."""
    if name not in PLOTS:
        raise InputError(f"unknown plot {name!r}; known: {', '.join(PLOTS)}", field="plot")
    figure = {
        "difference_ci": _difference_ci,
        "recall_curve": _recall_curve,
        "quality_cost": _quality_cost,
        "difference_hist": _difference_hist,
    }[name](rows, metric, baseline)
    return _png(figure)


def _difference_ci(rows: list[dict[str, Any]], metric: str, baseline: str):
    """A forest plot: one row per configuration, largest difference on top, the interval coloured by
    its verdict, a line at 0 (the baseline); configurations indistinguishable from the best in bold."""
    figure = _figure(6.2, 0.21 * max(len(rows), 2) + 1.6)  # 620 px wide: the page shows it at its size
    ax = figure.add_subplot()
    ys = np.arange(len(rows))[::-1]
    for y, row in zip(ys, rows):
        colour = VERDICT_COLOURS.get(row["verdict"], BASELINE_COLOUR)
        low = row["low"] if row["low"] is not None else row["difference"]
        high = row["high"] if row["high"] is not None else row["difference"]
        ax.plot([low, high], [y, y], color=colour, linewidth=2.2, solid_capstyle="butt")
        ax.plot([row["difference"]], [y], "o", color=colour, markersize=5)
    ax.axvline(0.0, color=BASELINE_COLOUR, linewidth=0.9)
    ax.set_yticks(ys, [r["config_id"] for r in rows], fontsize=8)
    for label, row in zip(ax.get_yticklabels(), rows):
        if row.get("best_set"):
            label.set_fontweight("bold")
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(f"{metric} difference (configuration − {baseline})", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=8)
    # From the figure's left edge: above the axes alone the title would be cut at the right.
    figure.suptitle(plot_title("difference_ci", metric, baseline, _confidence(rows)), x=0.01, ha="left", fontsize=10)
    from matplotlib.lines import Line2D  # as in _figure: only a PNG pays for matplotlib

    present = [v for v in VERDICT_COLOURS if any(r["verdict"] == v for r in rows)]
    handles = [Line2D([], [], color=VERDICT_COLOURS[v], linewidth=2.2, marker="o", markersize=5) for v in present]
    labels = list(present)
    if any(r.get("best_set") for r in rows):
        handles.append(Line2D([], [], linestyle="none"))
        labels.append("bold: as good as the best")
    if handles:  # under the axis label: inside the axes it would cover a row
        from matplotlib.transforms import offset_copy

        below = offset_copy(ax.transAxes, fig=figure, y=-30, units="points")
        ax.legend(
            handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(0.0, 0.0), bbox_transform=below, ncol=4,
            frameon=False,
        )  # fmt: skip
    figure.tight_layout()
    return figure


def _recall_curve(rows: list[dict[str, Any]], metric: str, baseline: str):
    """recall@k on a log k axis; the baseline black and on top; the legend beside the axes."""
    from matplotlib import colormaps  # as in _figure: only a PNG pays for matplotlib

    figure = _figure(9, 5)
    ax = figure.add_subplot()
    configs = list(dict.fromkeys(r["config_id"] for r in rows))
    colours = colormaps["tab20"].colors
    others = [c for c in configs if c != baseline]
    for i, config_id in enumerate(others):
        points = [(r["k"], r["recall"]) for r in rows if r["config_id"] == config_id]
        ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            label=config_id,
            color=colours[i % len(colours)],
            linestyle=("-", "--", ":")[(i // len(colours)) % 3],
            linewidth=1.2,
        )
    if baseline in configs:
        points = [(r["k"], r["recall"]) for r in rows if r["config_id"] == baseline]
        ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            label=f"{baseline} (baseline)",
            color=BASELINE_COLOUR,
            linewidth=2.4,
            zorder=5,
        )
    ax.set_xscale("log")
    ticks = [k for k in (1, 2, 5, 10, 20, 50, 100) if any(r["k"] == k for r in rows)]
    ax.set_xticks(ticks, [str(k) for k in ticks])
    ax.minorticks_off()
    lowest = min([r["recall"] for r in rows] + [1.0])
    ax.set_ylim(math.floor(lowest * 10) / 10, 1.0)
    ax.set_xlabel("k (documents, log scale)", fontsize=9)
    ax.set_ylabel("recall@k", fontsize=9)
    ax.set_title(plot_title("recall_curve", metric, baseline), loc="left", fontsize=10)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if baseline in configs:  # the baseline first in the legend
        handles, labels = handles[-1:] + handles[:-1], labels[-1:] + labels[:-1]
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    figure.tight_layout()
    return figure


def _quality_cost(rows: list[dict[str, Any]], metric: str, baseline: str):
    """Each configuration's metric against its index size, every point labelled where its label
    overlaps no other label and no point (:func:`_place_labels`)."""
    figure = _figure(8, 5.2)
    ax = figure.add_subplot()
    shown = [r for r in rows if r.get("index_mb") is not None]
    for row in shown:
        is_baseline = row["config_id"] == baseline
        ax.scatter(
            [row["index_mb"]],
            [row["quality"]],
            s=46 if is_baseline else 30,
            color=BASELINE_COLOUR if is_baseline else "#1f5fa8",
            zorder=3,
        )
    if shown:
        xs, ys = [r["index_mb"] for r in shown], [r["quality"] for r in shown]
        x_pad, y_pad = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 0.1
        ax.set_xlim(min(xs) - 0.08 * x_pad, max(xs) + 0.35 * x_pad)
        ax.set_ylim(min(ys) - 0.08 * y_pad, max(ys) + 0.08 * y_pad)
    ax.set_xlabel("index size (MB)", fontsize=9)
    ax.set_ylabel(metric, fontsize=9)
    ax.grid(alpha=0.3)
    ax.set_title(plot_title("quality_cost", metric, baseline), loc="left", fontsize=10)
    figure.tight_layout()
    labels = [
        (r["config_id"] + (" (baseline)" if r["config_id"] == baseline else ""), r["index_mb"], r["quality"])
        for r in shown
    ]
    _place_labels(figure, ax, labels)
    return figure


# Where a label may go, in points from its point: beside it first, then above and below, then further out.
_OFFSETS = [
    (dx * scale, dy * scale, ha)
    for scale in (1, 2, 3.2)
    for dx, dy, ha in ((5, -3, "left"), (-5, -3, "right"), (5, 5, "left"), (5, -11, "left"), (-5, 5, "right"),
                       (-5, -11, "right"), (0, 7, "center"), (0, -14, "center"))
]  # fmt: skip


def _place_labels(figure, ax, labels: Sequence[tuple[str, float, float]]) -> None:
    """Annotate each point with its label at the first offset (:data:`_OFFSETS`) where the label's
    box, inside the axes, overlaps no label placed before and no point; failing that, at the offset
    overlapping least, with a leader line. Layout, in display pixels; not a figure of the data."""
    renderer = figure.canvas.get_renderer()
    points = [ax.transData.transform((x, y)) for _, x, y in labels]
    radius = 4.0
    obstacles = [(px - radius, py - radius, px + radius, py + radius) for px, py in points]
    frame = ax.get_window_extent(renderer)

    def overlap(box, other) -> float:
        width = min(box[2], other[2]) - max(box[0], other[0])
        height = min(box[3], other[3]) - max(box[1], other[1])
        return max(width, 0.0) * max(height, 0.0)

    # Densest first: a point with many neighbours takes the free place next to it before they do.
    def crowding(i: int) -> float:
        return -sum(
            1.0 for j in range(len(points)) if abs(points[i][0] - points[j][0]) + abs(points[i][1] - points[j][1]) < 60
        )

    for i in sorted(range(len(labels)), key=lambda i: (crowding(i), labels[i][0])):
        text, x, y = labels[i]
        best = None
        for dx, dy, ha in _OFFSETS:
            note = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=7, ha=ha)
            extent = note.get_window_extent(renderer)
            box = (extent.x0 - 1, extent.y0 - 1, extent.x1 + 1, extent.y1 + 1)
            outside = box[0] < frame.x0 or box[2] > frame.x1 or box[1] < frame.y0 or box[3] > frame.y1
            cost = sum(overlap(box, other) for k, other in enumerate(obstacles) if k != i) + (1e6 if outside else 0.0)
            if best is None or cost < best[0]:
                if best is not None:
                    best[1].remove()
                best = (cost, note, box, (dx, dy))
            else:
                note.remove()
            if cost == 0.0:
                break
        cost, note, box, (dx, dy) = best
        if abs(dx) > 6 or abs(dy) > 12:  # moved away from its point: a leader line shows whose it is
            note.remove()
            note = ax.annotate(
                text,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                fontsize=7,
                ha=_OFFSETS[[o[:2] for o in _OFFSETS].index((dx, dy))][2],
                arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 3},
            )
        obstacles.append(box)


def _difference_hist(rows: list[dict[str, Any]], metric: str, baseline: str):
    """Small multiples, four to a row, in the order of the rows; shared axes; a line at 0 (no change)."""
    candidates = list(dict.fromkeys(r["config_id"] for r in rows))
    columns = max(1, min(4, len(candidates)))
    lines = max(1, math.ceil(len(candidates) / columns))
    figure = _figure(10, 1.45 * lines + 1.1)
    reach = max([abs(r["difference"]) for r in rows] + [1e-9])
    edges = np.linspace(-reach, reach, 32)  # 31 bins, the middle one centred on 0 (no change)
    if not candidates:
        figure.add_subplot().text(0.5, 0.5, "no candidate besides the baseline", ha="center")
    axes = figure.subplots(lines, columns, sharex=True, sharey=True, squeeze=False) if candidates else []
    for i, config_id in enumerate(candidates):
        ax = axes[i // columns][i % columns]
        counts, _ = np.histogram([r["difference"] for r in rows if r["config_id"] == config_id], bins=edges)
        ax.stairs(counts, edges, fill=True, color="#1f5fa8")  # one artist, not a bar per bin: 23 panels draw fast
        ax.axvline(0.0, color=BASELINE_COLOUR, linewidth=0.8)
        ax.set_title(config_id, fontsize=8, loc="left")
        ax.tick_params(labelsize=7)
        if i % columns == 0:
            ax.set_ylabel("queries", fontsize=7)
    for j in range(len(candidates), lines * columns):
        axes[j // columns][j % columns].set_visible(False)
        if j - columns >= 0:  # the panel above shows its x axis instead
            axes[(j - columns) // columns][j % columns].tick_params(labelbottom=True)
    figure.suptitle(plot_title("difference_hist", metric, baseline), x=0.01, ha="left", fontsize=10)
    figure.supxlabel(f"{metric} difference (configuration − {baseline})", fontsize=9)
    # Margins in inches, fixed: tight_layout measured every panel's ticks first and took most of the drawing time.
    width, height = figure.get_size_inches()
    figure.subplots_adjust(
        left=0.7 / width, right=1 - 0.12 / width, bottom=0.62 / height, top=1 - 0.52 / height, wspace=0.12, hspace=0.36
    )
    return figure


# --------------------------------------------------------------------------- offline HTML


def offline_template(scripts: Mapping[str, str], versions: Mapping[str, str] = VENDORED) -> str:
    """The HTML template for `dvc plots show --html-template`: Vega inlined, no network.

    ``scripts`` maps vega, vega-lite and vega-embed to their UMD builds (build/*.min.js of the
    npm packages). DVC replaces ``{plot_divs}`` and ``{refresh_tag}``; the template has no
    ``{scripts}`` placeholder, so DVC's CDN script tags are never added.
    """
    missing = [name for name in VENDORED if name not in scripts]
    if missing:
        raise InputError(f"missing script(s) {', '.join(missing)}", field="scripts")
    blocks = []
    for name in VENDORED:
        code = "\n".join(line for line in scripts[name].splitlines() if not line.startswith("//# sourceMappingURL="))
        if "</script" in code.lower() or any(p in code for p in (*PLACEHOLDERS, "{scripts}")):
            raise InputError("cannot be inlined (holds </script> or a template placeholder)", field=name)
        blocks.append(
            f"<script type=\"text/javascript\">/* {name} {versions[name]} (BSD-3-Clause) */\n{code}\n</script>"
        )
    return (
        "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n{refresh_tag}\n"
        "<title>DVC Plot (offline)</title>\n" + "\n".join(blocks) + "\n"
        "<style>body { font-family: sans-serif; } table { border-spacing: 15px; }</style>\n"
        "</head>\n<body>\n{plot_divs}\n</body>\n</html>\n"
    )


def check_offline_template(text: str) -> list[str]:
    """Problems that would stop a template from rendering offline (empty when fine)."""
    problems = []
    lowered = text.lower()
    if "{plot_divs}" not in text:
        problems.append("no {plot_divs} placeholder")
    if "{scripts}" in text:
        problems.append("a {scripts} placeholder (DVC would add CDN script tags)")
    if re.search(r"<script[^>]*\bsrc\s*=", lowered) or re.search(r"<link[^>]*\bhref\s*=\s*[\"']?https?:", lowered):
        problems.append("a script or stylesheet loaded from a file or URL")
    for name in VENDORED:
        if f"/* {name} {VENDORED[name]}" not in text:
            problems.append(f"{name} {VENDORED[name]} is not inlined")
    return problems


def write_assets(scripts_dir: str | Path, out_dir: str | Path = "dvc_plots") -> None:
    """Rebuild dvc_plots/offline.html and dvc_plots/templates/*.json.

    ``scripts_dir`` holds vega.min.js, vega-lite.min.js and vega-embed.min.js, the ``build/``
    files of the npm packages at the versions in :data:`VENDORED` (``npm pack vega@5.33.1
    vega-lite@5.23.0 vega-embed@6.29.0``, then unpack).
    """
    scripts_dir, out_dir = Path(scripts_dir), Path(out_dir)
    scripts = {name: (scripts_dir / f"{name}.min.js").read_text(encoding="utf-8") for name in VENDORED}
    write_text(out_dir / "offline.html", offline_template(scripts))
    for name, template in dvc_templates().items():
        write_text(out_dir / "templates" / f"{name}.json", json.dumps(template, indent=2) + "\n")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=write_assets.__doc__.splitlines()[0])
    parser.add_argument("scripts_dir")
    parser.add_argument("--out", default="dvc_plots")
    arguments = parser.parse_args()
    write_assets(arguments.scripts_dir, arguments.out)
