"""Plots of a scored grid: Vega-Lite specs, DVC templates, PNGs and an offline page.

Four plots, each first a plain table (a list of JSON-safe rows, computed by
:mod:`releval.measurement.plot_tables`) that is written as a DVC plot data file, then drawn two
ways: a Vega-Lite spec (for `dvc plots show` through the templates in dvc_plots/templates/, and
for the offline HTML page) and a PNG (matplotlib, Agg canvas, no display needed):

``ndcg_ci``          the primary metric per configuration with a 95% percentile bootstrap
                     interval over queries (:func:`releval.measurement.stats.bootstrap_means`)
``recall_curve``     recall@k for k = 1..100 per configuration, from the runs themselves
``quality_cost``     the primary metric against cost: index size and encoding throughput
``difference_hist``  per-query differences, candidate − baseline, one histogram per candidate

Pure: tables and dicts in, specs, bytes and text out; nothing here computes a figure; the stage
writes the files.

`dvc plots show` loads Vega from a CDN by default. dvc_plots/offline.html is an HTML template
with Vega, Vega-Lite and Vega-Embed inlined (:func:`offline_template`), so the page DVC writes,
and the report page written by :func:`html_page`, render without a network.
"""

from __future__ import annotations

import html as _html
import io
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from releval import paths
from releval.errors import InputError
from releval.io import write_text

PLOTS = ("ndcg_ci", "recall_curve", "quality_cost", "difference_hist")
TEMPLATES = {
    "ndcg_ci": "interval_by_config",
    "recall_curve": "lines_by_config",
    "quality_cost": "scatter_by_config",
    "difference_hist": "histogram_by_config",
}
VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
# The JavaScript inlined into dvc_plots/offline.html (npm packages; see dvc_plots/README.md).
VENDORED = {"vega": "5.33.1", "vega-lite": "5.23.0", "vega-embed": "6.29.0"}
PLACEHOLDERS = ("{plot_divs}", "{refresh_tag}")


# --------------------------------------------------------------------------- Vega-Lite


def _title(text: str) -> dict[str, Any]:
    return {"text": text, "anchor": "start"}


def vega_specs(tables: Mapping[str, list[dict[str, Any]]], metric: str, baseline: str) -> dict[str, dict[str, Any]]:
    """Self-contained Vega-Lite specs (data inlined) for the four plots."""
    specs = {}
    if "ndcg_ci" in tables:
        rows = tables["ndcg_ci"]
        confidence = f"{rows[0]['confidence']:.0%}" if rows else "95%"
        order = [r["config_id"] for r in rows]
        y = {"field": "config_id", "type": "nominal", "sort": order, "title": None}
        specs["ndcg_ci"] = {
            "$schema": VEGA_LITE_SCHEMA,
            "title": _title(f"{metric} per configuration, {confidence} bootstrap CI"),
            "data": {"values": rows},
            "width": 420,
            "layer": [
                {
                    "mark": {"type": "rule", "strokeWidth": 2},
                    "encoding": {
                        "y": y,
                        "x": {"field": "low", "type": "quantitative", "title": metric, "scale": {"zero": False}},
                        "x2": {"field": "high"},
                    },
                },
                {
                    "mark": {"type": "point", "filled": True, "size": 70},
                    "encoding": {
                        "y": y,
                        "x": {"field": "mean", "type": "quantitative"},
                        "tooltip": [{"field": f} for f in ("config_id", "mean", "low", "high", "queries")],
                    },
                },
            ],
        }
    if "recall_curve" in tables:
        specs["recall_curve"] = {
            "$schema": VEGA_LITE_SCHEMA,
            "title": _title("recall@k per configuration"),
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
            "title": _title(f"{metric} against cost"),
            "data": {"values": values},
            # Cost figures only: throughput and latency depend on the machine (reports/ops.json).
            "hconcat": [panel("index_mb", "index size (MB)")],
        }
    if "difference_hist" in tables:
        specs["difference_hist"] = {
            "$schema": VEGA_LITE_SCHEMA,
            "title": _title(f"per-query {metric} difference, candidate − {baseline}"),
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
                        "title": f"{metric} difference",
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
                            {"field": "mean"},
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
        "ndcg_ci": (
            "config_id",
            "mean",
            "configuration",
            "primary metric",
            "primary metric per configuration, 95% bootstrap CI",
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
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def render_png(name: str, rows: list[dict[str, Any]], metric: str, baseline: str) -> bytes:
    """One plot as PNG bytes (matplotlib's Agg canvas: no display, no global pyplot state)."""
    if name == "ndcg_ci":
        figure = _figure(7, 0.45 * max(len(rows), 2) + 1.2)
        ax = figure.add_subplot()
        ordered = list(reversed(rows))
        ys = np.arange(len(ordered))
        means = [r["mean"] for r in ordered]
        lows = [r["mean"] - (r["low"] if r["low"] is not None else r["mean"]) for r in ordered]
        highs = [(r["high"] if r["high"] is not None else r["mean"]) - r["mean"] for r in ordered]
        ax.errorbar(means, ys, xerr=[lows, highs], fmt="o", color="#1f5fa8", ecolor="#1f5fa8", capsize=3)
        ax.set_yticks(ys, [r["config_id"] for r in ordered])
        confidence = f"{rows[0]['confidence']:.0%}" if rows else "95%"
        ax.set_xlabel(metric)
        ax.set_title(f"{metric} per configuration, {confidence} bootstrap CI", loc="left")
        ax.grid(axis="x", alpha=0.3)
    elif name == "recall_curve":
        figure = _figure(7, 4.5)
        ax = figure.add_subplot()
        configs = sorted({r["config_id"] for r in rows})
        palette = _palette(configs)
        for config_id in configs:
            points = [(r["k"], r["recall"]) for r in rows if r["config_id"] == config_id]
            ax.plot([p[0] for p in points], [p[1] for p in points], label=config_id, color=palette[config_id])
        ax.set_xlabel("k (documents)")
        ax.set_ylabel("recall@k")
        ax.set_ylim(0, 1)
        ax.set_title("recall@k per configuration", loc="left")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    elif name == "quality_cost":
        figure = _figure(6, 4.2)
        palette = _palette(sorted({r["config_id"] for r in rows}))
        for i, (field, label) in enumerate((("index_mb", "index size (MB)"),)):
            ax = figure.add_subplot(1, 1, i + 1)
            for row in rows:
                if row.get(field) is None:
                    continue
                ax.scatter([row[field]], [row["quality"]], s=40, color=palette[row["config_id"]])
                ax.annotate(
                    row["config_id"],
                    (row[field], row["quality"]),
                    fontsize=7,
                    xytext=(4, 3),
                    textcoords="offset points",
                )
            ax.set_xlabel(label)
            ax.set_ylabel(metric)
            ax.grid(alpha=0.3)
        figure.suptitle(f"{metric} against cost", x=0.01, ha="left")
    elif name == "difference_hist":
        candidates = sorted({r["config_id"] for r in rows})
        figure = _figure(7, 1.6 * max(len(candidates), 1) + 1.0)
        reach = max([abs(r["difference"]) for r in rows] + [1e-9])
        edges = np.linspace(-reach, reach, 32)  # 31 bins, the middle one centred on 0 (no change)
        for i, config_id in enumerate(candidates):
            ax = figure.add_subplot(len(candidates), 1, i + 1)
            ax.hist([r["difference"] for r in rows if r["config_id"] == config_id], bins=edges, color="#1f5fa8")
            ax.axvline(0.0, color="black", linewidth=0.8)
            ax.set_ylabel("queries", fontsize=7)
            ax.set_title(config_id, fontsize=8, loc="left")
        if not candidates:
            figure.add_subplot().text(0.5, 0.5, "no candidate besides the baseline", ha="center")
        figure.suptitle(f"per-query {metric} difference, candidate − {baseline}", x=0.01, ha="left")
        figure.supxlabel(f"{metric} difference")
    else:
        raise InputError(f"unknown plot {name!r}; known: {', '.join(PLOTS)}", field="plot")
    figure.tight_layout()
    return _png(figure)


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


def plot_div(element_id: str, spec: Mapping[str, Any]) -> str:
    """The element DVC's Vega renderer writes for a plot (same markup, so pages look alike)."""
    payload = json.dumps(spec, allow_nan=False).replace("</", "<\\/")
    return (
        f'<div id="{element_id}">\n<script type="text/javascript">\n'
        f"var spec = {payload};\n"
        f"vegaEmbed('#{element_id}', spec, {{actions: false, renderer: 'svg'}});\n</script>\n</div>"
    )


def html_page(
    template: str,
    specs: Mapping[str, Mapping[str, Any]],
    title: str,
    intro_html: str = "",
    images: Mapping[str, str] | None = None,
) -> str:
    """The report page: the offline template with a heading and one Vega-Lite chart per plot."""
    problems = check_offline_template(template)
    if problems:
        raise InputError("; ".join(problems), file=paths.OFFLINE_TEMPLATE)
    parts = [f"<h1>{_html.escape(title)}</h1>", intro_html]
    for name, spec in specs.items():
        parts.append(f"<h2>{_html.escape(name)}</h2>")
        parts.append(plot_div(f"plot-{name}", spec))
        if images and name in images:
            parts.append(f'<p><a href="{_html.escape(images[name])}">PNG</a></p>')
    page = template.replace("{refresh_tag}", "").replace("{plot_divs}", "\n".join(parts))
    return page.replace("<title>DVC Plot (offline)</title>", f"<title>{_html.escape(title)}</title>", 1)


def read_template(path: str | Path = paths.OFFLINE_TEMPLATE) -> str:
    path = Path(path)
    if not path.exists():
        raise InputError("missing: the offline HTML template (Vega inlined) is committed there", file=str(path))
    return path.read_text(encoding="utf-8")


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
