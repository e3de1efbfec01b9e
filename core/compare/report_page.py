"""Writes DIR/report.html from DIR/compare.json, the results `duet compare
EXPERIMENT.yaml --report DIR` measured: one self-contained HTML page (CSS
inline, charts as PNG data URIs, no external script, style sheet or font, so
it opens offline and can be mailed or attached to a CI run as one file).

usage: report_page.py DIR

The C++ command runs it in the venv of scripts/python-env.sh (matplotlib is
one of the pins there); it draws with matplotlib's Agg backend, so no display
is needed. Exit status: 0 when the page was written; 1 when DIR/compare.json
is missing, unreadable, not JSON or not shaped as below, with one line on
stderr saying which; 2 for a wrong command line. The page is written to a
temporary file first and renamed, so a failed run leaves no half page.

What the page holds
-------------------
Header: the experiment file, the baseline variant, Duet's version, the
machine (CPU model and the CPU features Duet detected), the workload (prompt
and generation lengths, depths, rounds per test, the fidelity text, its
context size, the greedy prompts and tokens per prompt) and the date the
page was written (UTC). A run that was interrupted says so in a banner.

Charts. Only variants whose status is "ok" are drawn; a failed or
interrupted variant appears in the tables only (the page lists which ones
were left out of the charts), and a missing figure (null) is never drawn as
zero. When a chart has nothing to draw it shows a short sentence instead,
so the page always holds the same three images.

  chart-throughput: one panel per speed test (pp512, tg128, tg128@d512, ...)
    in the order the tests first appear, each with its own y axis because
    prompt processing and generation differ by an order of magnitude. One
    bar per variant at the median tokens per second over the rounds, with
    an error bar from the slowest to the fastest round, and the median
    printed above it. Each variant keeps one colour in every panel; the
    baseline is dark grey with hatching and "(baseline)" in the legend.

  chart-memory: per variant, the peak resident set size of the process
    (MiB) and, next to it, the device (accelerator) memory where the
    backend reported it (non-null). The baseline's label is in bold and its
    bars are hatched.

  chart-pareto: speed against fidelity. x is the mean KL divergence of the
    variant's next-token distribution from the baseline's over the fidelity
    text (log scale; lower is more faithful), y is the median tokens per
    second of the first generation test (the first test named tg..., the
    same test for every variant). Every point is labelled with its variant
    name; the baseline is a star. A KL divergence of exactly 0 (the baseline
    itself, or a variant bit-identical to it) cannot sit on a log axis: such
    points are placed at a floor: the power of ten one decade below the
    decade of the smallest positive KL divergence (0.00124 gives 1e-4; 1e-6
    when no KL divergence is positive). The floor is a dotted vertical line
    labelled "KLD = 0 (drawn at this floor)" and its tick reads 0. A variant
    without a fidelity result or without that tg test is not drawn.

    The Pareto front is the set of variants that no other variant beats on
    both counts: B dominates A when B's KL divergence is no larger and its
    speed no lower, and at least one of them is strictly better. Computed
    by sorting the points by KL divergence (ties: faster first) and keeping
    each point that is faster than every point kept before it (of two
    points with the same figures only the first is kept). The front is
    drawn as a step line (steps-post): from each front point a horizontal
    segment at its speed to the next front point's KL divergence, then up to
    that point's speed; the area below and to the right of the line is what
    the front dominates. Front points are filled, dominated points are
    hollow: for a hollow point another variant is no slower and no less
    faithful, so it is never the one to pick.

Tables: variants (backend, status, overrides, load time); speed (for every
variant and test: median, min and max tokens per second, the samples of each
round, the median relative to the baseline's on the same test, and the time
to first token where measured); memory (peak RSS and device memory, in MiB,
the exact bytes on hover); fidelity (perplexity of the variant and the baseline
and their ratio, KL divergence mean, median, 99th percentile and max, top-1
agreement, RMS of the probability difference and logits NMSE); greedy
agreement (per variant and prompt: matching tokens out of those generated,
the first divergent token index, and the baseline's and the variant's
continuation, HTML-escaped in <pre>); failures (step, exit code and reason
of each failed variant, and the variants that were interrupted). Figures are
printed to four significant digits (perplexities five), a null figure as an
em dash; the baseline's rows are tinted blue, a variant not "ok" pink.

For a check in a browser, an inline script counts, once the page has
loaded, the chart images that decoded (naturalWidth > 0) and writes the
count into <body data-charts-rendered="N"> and the element #charts-status;
scripts/check-report.sh reads it with headless Chromium.
"""
import base64
import datetime
import html
import io
import json
import math
import os
import pathlib
import sys

BASELINE_COLOR = "#3a3a3a"
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
MIB = 1024 * 1024
CHART_IDS = ("chart-throughput", "chart-memory", "chart-pareto")


class InputError(Exception):
    """compare.json is missing or not what `duet compare` writes."""


# ---------------------------------------------------------------- input

def num(value):
    """The value as a float when it is a finite JSON number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def as_dict(value):
    return value if isinstance(value, dict) else {}


def as_list(value):
    return value if isinstance(value, list) else []


def load(directory):
    path = pathlib.Path(directory) / "compare.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path} not found")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read {path}: {error}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path} is not valid JSON: {error}")
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object at the top level")
    variants = data.get("variants")
    if not isinstance(variants, list):
        raise InputError(f"{path}: 'variants' must be a list")
    for index, variant in enumerate(variants):
        if not isinstance(variant, dict) or not isinstance(variant.get("name"), str):
            raise InputError(f"{path}: variants[{index}] must be an object with a string 'name'")
    return data


def speed_tests(variants):
    """Test names in the order they first appear over the variants."""
    names = []
    for variant in variants:
        for entry in as_list(variant.get("speed")):
            name = as_dict(entry).get("test")
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names


def speed_of(variant, test):
    """(median, min, max, samples, ttft_ms) of one test, or None."""
    for entry in as_list(variant.get("speed")):
        entry = as_dict(entry)
        if entry.get("test") == test:
            tps = as_dict(entry.get("tokens_per_second"))
            return (num(tps.get("median")), num(tps.get("min")), num(tps.get("max")),
                    [num(s) for s in as_list(tps.get("samples"))], num(entry.get("ttft_ms")))
    return None


def is_ok(variant):
    return variant.get("status") == "ok"


# ---------------------------------------------------------------- charts

def colors_for(variants, baseline):
    colors, i = {}, 0
    for variant in variants:
        if variant["name"] == baseline:
            colors[variant["name"]] = BASELINE_COLOR
        else:
            colors[variant["name"]] = PALETTE[i % len(PALETTE)]
            i += 1
    return colors


def png_data_uri(fig):
    buffer = io.BytesIO()
    # No metadata: the PNG stays free of the Software tag (with its URL).
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    import matplotlib.pyplot as plt
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def empty_chart(title, message):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 2.6))
    ax.set_axis_off()
    ax.set_title(title, fontsize=13, loc="left")
    ax.text(0.5, 0.45, message, ha="center", va="center", fontsize=12, color="#666666",
            transform=ax.transAxes)
    return png_data_uri(fig)


def throughput_chart(variants, baseline, colors):
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    title = "Throughput per speed test (bar: median tok/s; whisker: min to max over rounds)"
    tests = [t for t in speed_tests(variants)
             if any((speed_of(v, t) or (None,))[0] is not None for v in variants)]
    if not tests:
        return empty_chart(title, "No speed measurements to draw.")
    cols = min(len(tests), 3)
    rows = math.ceil(len(tests) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(11, 3.9 * rows + 0.9), squeeze=False)
    for ax in axes.flat[len(tests):]:
        ax.set_visible(False)
    for ax, test in zip(axes.flat, tests):
        drawn = [(v["name"], speed_of(v, test)) for v in variants]
        drawn = [(name, s) for name, s in drawn if s is not None and s[0] is not None]
        xs = list(range(len(drawn)))
        medians = [s[0] for _, s in drawn]
        lows = [s[0] - s[1] if s[1] is not None else 0.0 for _, s in drawn]
        highs = [s[2] - s[0] if s[2] is not None else 0.0 for _, s in drawn]
        bars = ax.bar(xs, medians, color=[colors[name] for name, _ in drawn], width=0.7,
                      yerr=[[max(v, 0.0) for v in lows], [max(v, 0.0) for v in highs]],
                      capsize=5, error_kw={"elinewidth": 1.2, "ecolor": "#222222"})
        for bar, (name, _) in zip(bars, drawn):
            if name == baseline:
                bar.set_hatch("//")
                bar.set_edgecolor("white")
        top = max((s[2] if s[2] is not None else s[0]) for _, s in drawn)
        crowded = len(drawn) > 4
        for x, (name, s) in zip(xs, drawn):
            label_y = (s[2] if s[2] is not None else s[0]) + 0.02 * top
            ax.text(x, label_y, f"{s[0]:.4g}", ha="center", va="bottom",
                    fontsize=8 if crowded else 8.5, rotation=90 if crowded else 0)
        ax.set_ylim(0, top * (1.25 if crowded else 1.15) if top > 0 else 1)
        ax.set_title(test, fontsize=12)
        extra = max(3 - len(drawn), 0) / 2  # one or two bars keep a bar's width
        ax.set_xlim(-0.5 - extra, len(drawn) - 0.5 + extra)
        ax.set_xticks(xs)
        ax.set_xticklabels([])
        ax.tick_params(axis="x", length=0)
        ax.set_ylabel("tokens / s")
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    charted = {name for test in tests for name, s in
               ((v["name"], speed_of(v, test)) for v in variants)
               if s is not None and s[0] is not None}
    handles = [Patch(facecolor=colors[v["name"]], hatch="//" if v["name"] == baseline else None,
                     edgecolor="white",
                     label=v["name"] + (" (baseline)" if v["name"] == baseline else ""))
               for v in variants if v["name"] in charted]
    fig.suptitle(title, fontsize=13, x=0.01, ha="left")
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), frameon=False,
               fontsize=10)
    legend_rows = math.ceil(len(handles) / 4)
    fig.tight_layout(rect=(0, 0.06 * legend_rows / rows + 0.02, 1, 0.96))
    return png_data_uri(fig)


def memory_chart(variants, baseline, colors):
    import matplotlib.pyplot as plt
    title = "Memory per variant (MiB)"
    drawn = [v for v in variants
             if num(v.get("peak_rss_bytes")) is not None or num(v.get("device_bytes")) is not None]
    if not drawn:
        return empty_chart(title, "No memory measurements to draw.")
    any_device = any(num(v.get("device_bytes")) is not None for v in drawn)
    fig, ax = plt.subplots(figsize=(11, max(2.6, 1.3 + len(drawn) * (0.75 if any_device else 0.5))))
    height = 0.4 if any_device else 0.62
    ys = list(range(len(drawn)))
    largest = max(max(num(v.get("peak_rss_bytes")) or 0, num(v.get("device_bytes")) or 0)
                  for v in drawn) / MIB
    for y, variant in zip(ys, drawn):
        name = variant["name"]
        hatch = "//" if name == baseline else None
        bars = [("peak RSS", num(variant.get("peak_rss_bytes")), colors[name], 1.0)]
        if any_device:
            bars.append(("device", num(variant.get("device_bytes")), colors[name], 0.45))
        for i, (kind, value, color, alpha) in enumerate(bars):
            offset = (i - (len(bars) - 1) / 2) * height
            if value is None:
                ax.text(0, y + offset, f"  {kind}: not reported", va="center", fontsize=7.5,
                        color="#777777")
                continue
            ax.barh(y + offset, value / MIB, height=height * 0.92, color=color, alpha=alpha,
                    hatch=hatch, edgecolor="white")
            ax.text(value / MIB + largest * 0.01, y + offset, f"{kind} {value / MIB:,.1f}",
                    va="center", fontsize=8.5)
    ax.set_yticks(ys)
    ax.set_yticklabels([v["name"] for v in drawn])
    for label, variant in zip(ax.get_yticklabels(), drawn):
        if variant["name"] == baseline:
            label.set_fontweight("bold")
    ax.invert_yaxis()
    ax.set_xlim(0, largest * 1.25 if largest > 0 else 1)
    ax.set_xlabel("MiB (peak resident set size; lighter bar: device memory)"
                  if any_device else "MiB (peak resident set size)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title(title + " — baseline in bold, hatched", fontsize=13, loc="left")
    fig.tight_layout()
    return png_data_uri(fig)


def pareto_points(variants, tg_test):
    """(name, kld_mean, tok/s) for variants with both figures."""
    points = []
    for variant in variants:
        kld = num(as_dict(variant.get("fidelity")).get("kld_mean"))
        s = speed_of(variant, tg_test) if tg_test else None
        if kld is None or s is None or s[0] is None or kld < 0:
            continue
        points.append((variant["name"], kld, s[0]))
    return points


def pareto_front(points):
    """The points no other point dominates (lower-or-equal KLD and higher-or-
    equal speed, one of them strictly), by increasing KLD."""
    front, best = [], -math.inf
    for point in sorted(points, key=lambda p: (p[1], -p[2])):
        if point[2] > best:
            front.append(point)
            best = point[2]
    return front


def pareto_chart(variants, baseline, colors, tg_test):
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation
    title = f"Speed against fidelity ({tg_test or 'tg'} median tok/s vs mean KL divergence)"
    points = pareto_points(variants, tg_test)
    if not tg_test:
        return empty_chart(title, "No generation (tg) speed test to draw.")
    if not points:
        return empty_chart(title, "No variant has both a fidelity result and a "
                                  f"{tg_test} speed to draw.")
    positive = [p[1] for p in points if p[1] > 0]
    floor = 10 ** (math.floor(math.log10(min(positive))) - 1) if positive else 1e-6
    front = pareto_front(points)
    front_names = {p[0] for p in front}
    fig, ax = plt.subplots(figsize=(11, 6))
    ax.set_xscale("log")
    xs = {name: (kld if kld > 0 else floor) for name, kld, _ in points}
    # Limits first: a lone point would otherwise give a singular x range.
    ax.set_xlim(floor / 3, max(max(xs.values()) * 10, floor * 100))
    if len(front) > 1:
        ax.plot([xs[p[0]] for p in front], [p[2] for p in front], drawstyle="steps-post",
                color="#2a7f62", linewidth=2, alpha=0.8, label="Pareto front", zorder=1)
    elif front:
        ax.plot([], [], color="#2a7f62", linewidth=2, label="Pareto front")
    ax.axvline(floor, color="#999999", linestyle=":", linewidth=1.2, zorder=0)
    for i, (name, kld, tps) in enumerate(points):
        on_front = name in front_names
        is_base = name == baseline
        ax.scatter([xs[name]], [tps], s=260 if is_base else 90,
                   marker="*" if is_base else "o", zorder=3,
                   facecolors=colors[name] if on_front else "white",
                   edgecolors=colors[name], linewidths=2)
        label = name + (" (baseline)" if is_base else "")
        ax.annotate(label, (xs[name], tps), textcoords="offset points",
                    xytext=(9, 9 if i % 2 == 0 else -15), fontsize=10,
                    fontweight="bold" if is_base else "normal")
    speeds = [p[2] for p in points]
    low, high = min(speeds), max(speeds)
    pad = (high - low) * 0.15 if high > low else max(high * 0.1, 1.0)
    ax.set_ylim(max(0.0, low - pad), high + pad)
    ax.text(floor, 0.02, " KLD = 0 (drawn at this floor)", transform=ax.get_xaxis_transform(),
            fontsize=9, color="#666666", ha="left", va="bottom")
    # The floor's tick reads 0, not the power of ten it sits at.
    scientific = LogFormatterSciNotation()
    scientific.set_axis(ax.xaxis)
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda x, pos: "0" if math.isclose(x, floor, rel_tol=1e-9) else scientific(x, pos)))
    ax.set_xlabel("mean KL divergence from the baseline (log scale; left = more faithful)")
    ax.set_ylabel(f"{tg_test} median tokens / s (up = faster)")
    ax.grid(True, which="major", alpha=0.3)
    ax.scatter([], [], marker="o", facecolors="#888888", edgecolors="#888888", label="on the front")
    ax.scatter([], [], marker="o", facecolors="white", edgecolors="#888888",
               label="dominated (another is no slower and no less faithful)")
    ax.scatter([], [], marker="*", s=160, facecolors="#888888", edgecolors="#888888",
               label="baseline")
    ax.legend(loc="best", fontsize=9, framealpha=0.9)
    ax.set_title(title, fontsize=13, loc="left")
    fig.tight_layout()
    return png_data_uri(fig)


# ---------------------------------------------------------------- tables

def esc(value):
    return html.escape("" if value is None else str(value), quote=True)


def fmt(value, digits=4):
    value = num(value)
    if value is None:
        return "—"
    if value == 0:
        return "0"
    return f"{value:.{digits}g}"


def fmt_mib(value):
    value = num(value)
    if value is None:
        return "—"
    return f'<span title="{int(value):,} bytes">{value / MIB:,.1f}</span>'


def fmt_int(value):
    value = num(value)
    return "—" if value is None else str(int(value))


def table(headers, rows, numeric=()):
    out = ["<table><thead><tr>"]
    out += [f"<th>{esc(h)}</th>" for h in headers]
    out.append("</tr></thead><tbody>")
    for row in rows:
        classes = row.get("class", "") if isinstance(row, dict) else ""
        cells = row["cells"] if isinstance(row, dict) else row
        out.append(f'<tr class="{classes}">' if classes else "<tr>")
        for i, cell in enumerate(cells):
            out.append(f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def name_cell(variant, baseline):
    name = esc(variant["name"])
    return f"<strong>{name}</strong> <span class=tag>baseline</span>" if variant["name"] == baseline else name


def row_class(variant, baseline):
    if variant["name"] == baseline:
        return "baseline"
    return "" if is_ok(variant) else "notok"


def status_cell(variant):
    status = variant.get("status")
    css = {"ok": "ok", "failed": "bad", "interrupted": "warn"}.get(status, "warn")
    return f'<span class="status {css}">{esc(status if status is not None else "unknown")}</span>'


def variants_table(variants, baseline):
    rows = []
    for v in variants:
        overrides = "<br>".join(f"<code>{esc(o)}</code>" for o in as_list(v.get("overrides")))
        rows.append({"class": row_class(v, baseline), "cells": [
            name_cell(v, baseline), esc(v.get("backend") or "—"), status_cell(v),
            overrides or "—", fmt(v.get("load_seconds"), 3)]})
    return table(["Variant", "Backend", "Status", "Overrides", "Load (s)"], rows, numeric={4})


def speed_table(variants, baseline):
    tests = speed_tests(variants)
    base = next((v for v in variants if v["name"] == baseline), None)
    rows = []
    for v in variants:
        measured = [(t, speed_of(v, t)) for t in tests]
        measured = [(t, s) for t, s in measured if s is not None]
        if not measured:
            rows.append({"class": row_class(v, baseline), "cells": [
                name_cell(v, baseline), "—", "—", "—", "—", "—", "—", "—"]})
            continue
        for t, (median, low, high, samples, ttft) in measured:
            ratio = "—"
            b = speed_of(base, t) if base is not None else None
            if b is not None and b[0] and median is not None:
                ratio = f"×{median / b[0]:.3f}"
            sample_text = ", ".join(fmt(s) for s in samples) if samples else "—"
            rows.append({"class": row_class(v, baseline), "cells": [
                name_cell(v, baseline), esc(t), fmt(median), fmt(low), fmt(high),
                f'<span class="samples">{sample_text}</span>', ratio, fmt(ttft)]})
    return table(["Variant", "Test", "Median tok/s", "Min", "Max", "Samples (per round)",
                  "Median vs baseline", "TTFT (ms)"], rows, numeric={2, 3, 4, 6, 7})


def memory_table(variants, baseline):
    rows = [{"class": row_class(v, baseline), "cells": [
        name_cell(v, baseline), fmt_mib(v.get("peak_rss_bytes")), fmt_mib(v.get("device_bytes")),
        fmt(v.get("load_seconds"), 3)]} for v in variants]
    return table(["Variant", "Peak RSS (MiB)", "Device memory (MiB)", "Load (s)"], rows,
                 numeric={1, 2, 3})


FIDELITY_COLUMNS = [
    ("perplexity", "Perplexity"), ("perplexity_base", "Baseline perplexity"),
    ("perplexity_ratio", "Perplexity ratio"), ("kld_mean", "KLD mean"),
    ("kld_median", "KLD median"), ("kld_p99", "KLD p99"), ("kld_max", "KLD max"),
    ("top1_agreement", "Top-1 agreement"), ("rms_delta_p", "RMS Δp"),
    ("logits_nmse", "Logits NMSE"),
]


def fidelity_table(variants, baseline):
    rows = []
    for v in variants:
        fidelity = v.get("fidelity")
        if not isinstance(fidelity, dict):
            cells = ["—"] * len(FIDELITY_COLUMNS)
        else:
            cells = []
            for key, _ in FIDELITY_COLUMNS:
                value = num(fidelity.get(key))
                if key == "top1_agreement" and value is not None:
                    cells.append(f"{value * 100:.2f} %")
                else:
                    cells.append(fmt(value, 5 if key.startswith("perplexity") else 4))
        rows.append({"class": row_class(v, baseline), "cells": [name_cell(v, baseline)] + cells})
    return table(["Variant"] + [label for _, label in FIDELITY_COLUMNS], rows,
                 numeric=set(range(1, len(FIDELITY_COLUMNS) + 1)))


def greedy_table(variants, baseline):
    rows = []
    for v in variants:
        for g in as_list(v.get("greedy")):
            g = as_dict(g)
            tokens, matching = num(g.get("tokens")), num(g.get("matching_tokens"))
            agreement = f"{fmt_int(matching)}/{fmt_int(tokens)}"
            diverged = num(g.get("first_divergence"))
            css = "agree" if diverged is None and tokens is not None and matching == tokens else "differ"
            divergence = "none" if g.get("first_divergence") is None else fmt_int(diverged)
            rows.append({"class": row_class(v, baseline), "cells": [
                name_cell(v, baseline), f"<pre>{esc(g.get('prompt'))}</pre>",
                f'<span class="{css}">{agreement}</span>', divergence,
                f"<pre>{esc(g.get('baseline_continuation'))}</pre>",
                f"<pre>{esc(g.get('continuation'))}</pre>"]})
    if not rows:
        return "<p>No greedy prompts were run.</p>"
    return table(["Variant", "Prompt", "Matching / total tokens", "First divergence (token)",
                  "Baseline continuation", "Variant continuation"], rows, numeric={2, 3})


def failures_section(variants, baseline):
    failed = [v for v in variants if v.get("status") == "failed"]
    other = [v for v in variants if v.get("status") not in ("ok", "failed")]
    parts = []
    if failed:
        rows = []
        for v in failed:
            failure = as_dict(v.get("failure"))
            rows.append([name_cell(v, baseline), esc(failure.get("step") or "—"),
                         fmt_int(failure.get("exit_code")),
                         f'<span class="reason">{esc(failure.get("reason") or "—")}</span>'])
        parts.append(table(["Variant", "Step", "Exit code", "Reason"], rows, numeric={2}))
    else:
        parts.append("<p>No variant failed.</p>")
    if other:
        names = ", ".join(f"{esc(v['name'])} ({esc(v.get('status') or 'no status')})" for v in other)
        parts.append(f"<p>Not completed: {names}.</p>")
    return "".join(parts)


# ---------------------------------------------------------------- page

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
 margin:0;background:#f5f6f8;color:#1d1f23;line-height:1.4}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px;background:#fff;min-height:100vh}
h1{font-size:1.6em;margin:0 0 4px}h2{font-size:1.25em;margin:32px 0 10px;
 border-bottom:2px solid #e3e6ea;padding-bottom:4px}
.sub{color:#5b6169;margin:0 0 16px}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:4px 18px;margin:0;font-size:.95em}
dl.meta dt{color:#5b6169}dl.meta dd{margin:0}
.banner{background:#fff4d6;border:1px solid #e8c766;padding:8px 12px;border-radius:4px;margin:12px 0}
figure{margin:18px 0}figure img{max-width:100%;height:auto;display:block;border:1px solid #e3e6ea}
figcaption{color:#5b6169;font-size:.9em;margin-top:4px}
table{border-collapse:collapse;width:100%;font-size:.88em;margin:6px 0 12px}
th,td{border:1px solid #dfe2e6;padding:4px 7px;vertical-align:top;text-align:left}
th{background:#eef1f4;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums;
 white-space:nowrap}
tr.baseline td{background:#f3f6fb}tr.notok td{background:#fdf1f1}
.tag{font-size:.75em;background:#3a3a3a;color:#fff;border-radius:3px;padding:1px 5px}
.status{font-weight:600}.status.ok{color:#1d7a3a}.status.bad{color:#b3261e}.status.warn{color:#9a6700}
.agree{color:#1d7a3a;font-weight:600}.differ{color:#b3261e;font-weight:600}
pre{margin:0;white-space:pre-wrap;word-break:break-word;font-size:.95em;max-width:380px}
code{font-size:.92em}.samples{color:#5b6169}.reason{font-family:monospace}
"""

SCRIPT = """
window.addEventListener('load', function () {
  var n = 0;
  document.querySelectorAll('img.chart').forEach(function (img) {
    if (img.complete && img.naturalWidth > 0) n++;
  });
  document.body.setAttribute('data-charts-rendered', String(n));
  var s = document.getElementById('charts-status');
  if (s) s.textContent = n + ' of 3 charts rendered';
});
"""


def render(data, generated):
    variants = as_list(data["variants"])
    baseline = data.get("baseline") if isinstance(data.get("baseline"), str) else None
    machine = as_dict(data.get("machine"))
    workload = as_dict(data.get("workload"))
    colors = colors_for(variants, baseline)
    charted = [v for v in variants if is_ok(v)]
    left_out = [v for v in variants if not is_ok(v)]
    tg_test = next((t for t in speed_tests(charted) if t.startswith("tg")), None)

    def listing(value):
        items = as_list(value)
        return ", ".join(esc(i) for i in items) if items else "—"

    def plain(value):
        return "—" if value is None or value == "" else esc(value)

    features = as_list(machine.get("cpu_features"))
    meta = [
        ("Experiment", f"<code>{plain(data.get('experiment'))}</code>"),
        ("Baseline", plain(baseline)),
        ("Variants", f"{len(variants)} ({sum(is_ok(v) for v in variants)} ok)"),
        ("Machine", f"{plain(machine.get('cpu_model'))}"
                    + (f" — {', '.join(esc(f) for f in features)}" if features else "")),
        ("Speed workload", f"prompt tokens {listing(workload.get('prompt_tokens'))}; "
                           f"generated tokens {listing(workload.get('gen_tokens'))}; "
                           f"depths {listing(workload.get('depths'))}; "
                           f"{plain(workload.get('rounds'))} rounds per test"),
        ("Fidelity workload", f"<code>{plain(workload.get('fidelity_text'))}</code>, "
                              f"context {plain(workload.get('ctx'))} tokens; "
                              f"{plain(workload.get('prompts'))} greedy prompts of "
                              f"{plain(workload.get('greedy_tokens'))} tokens"),
        ("Duet", plain(data.get("duet_version"))),
        ("Report written", esc(generated)),
    ]
    charts = [
        (CHART_IDS[0], throughput_chart(charted, baseline, colors),
         "Throughput per variant and speed test: bars at the median tokens per second, "
         "whiskers from min to max over the rounds; the baseline is hatched dark grey."),
        (CHART_IDS[1], memory_chart(charted, baseline, colors),
         "Peak resident set size and, where reported, device memory per variant in MiB."),
        (CHART_IDS[2], pareto_chart(charted, baseline, colors, tg_test),
         "Speed against fidelity: generation tokens per second against mean KL divergence "
         "from the baseline (log scale, KLD 0 placed at a floor); the step line is the "
         "Pareto front, filled points lie on it, hollow points are dominated."),
    ]
    out = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
           f"<title>duet compare — {plain(data.get('experiment'))}</title>",
           f"<style>{CSS}</style></head><body data-charts-rendered=\"0\"><main>",
           "<h1>duet compare report</h1>",
           f"<p class=\"sub\">{plain(data.get('experiment'))} against baseline "
           f"<strong>{plain(baseline)}</strong></p>",
           "<dl class=\"meta\">"]
    out += [f"<dt>{k}</dt><dd>{v}</dd>" for k, v in meta]
    out.append("</dl>")
    if data.get("interrupted") is True:
        out.append("<p class=\"banner\">The run was interrupted: the results are partial.</p>")
    if baseline is not None and not any(v["name"] == baseline and is_ok(v) for v in variants):
        out.append(f"<p class=\"banner\">The baseline {esc(baseline)} did not complete: "
                   "ratios to it and fidelity figures are missing.</p>")
    out.append("<h2>Charts</h2>")
    if left_out:
        out.append("<p>Not charted (see the tables): " + ", ".join(
            f"{esc(v['name'])} ({esc(v.get('status') or 'no status')})" for v in left_out) + ".</p>")
    for chart_id, uri, alt in charts:
        out.append(f"<figure><img class=\"chart\" id=\"{chart_id}\" alt=\"{esc(alt)}\" "
                   f"src=\"{uri}\"><figcaption>{esc(alt)}</figcaption></figure>")
    out.append("<p id=\"charts-status\" class=\"sub\"></p>")
    out += ["<h2>Variants</h2>", variants_table(variants, baseline),
            "<h2>Speed</h2>", speed_table(variants, baseline),
            "<h2>Memory</h2>", memory_table(variants, baseline),
            "<h2>Fidelity against the baseline</h2>", fidelity_table(variants, baseline),
            "<h2>Greedy prompts</h2>", greedy_table(variants, baseline),
            "<h2>Failures</h2>", failures_section(variants, baseline),
            f"</main><script>{SCRIPT}</script></body></html>\n"]
    return "".join(out)


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print("usage: report_page.py DIR  (reads DIR/compare.json, writes DIR/report.html)",
              file=sys.stderr)
        return 2
    directory = pathlib.Path(argv[1])
    try:
        data = load(directory)
    except InputError as error:
        print(f"compare_report: {error}", file=sys.stderr)
        return 1
    try:
        import matplotlib
        matplotlib.use("Agg")
    except ImportError as error:
        print(f"compare_report: matplotlib is missing ({error}); run it with the python "
              "that `bash scripts/python-env.sh` prints", file=sys.stderr)
        return 1
    generated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = render(data, generated)
    target = directory / "report.html"
    temporary = directory / "report.html.tmp"
    try:
        temporary.write_text(page, encoding="utf-8")
        os.replace(temporary, target)
    except OSError as error:
        print(f"compare_report: cannot write {target}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
