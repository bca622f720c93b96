"""Power-over-time plot for the report, as an inline SVG string.

matplotlib is imported lazily (only the report step pays for it) and always with the non-interactive
Agg backend, so it works in an Epilog with no display.
"""

from __future__ import annotations

import io
import math
import re
from typing import Optional, Sequence

from slurm_energy.model import NodeSummary

#: Columns of NodeSummary.power_trace rows after the time column, W.
TRACE_CLASSES = ("cpu", "gpu", "ram")
_COLOURS = {"cpu": "#1f77b4", "gpu": "#2ca02c", "ram": "#ff7f0e"}
_STYLES = ("-", "--", ":", "-.")
#: At most this many points per line are drawn (bin means beyond it), keeping the SVG small.
MAX_POINTS = 1500
#: At most this many nodes are drawn separately; the rest are named in the title.
MAX_NODES = 4


def downsample(ts: Sequence[float], ys: Sequence[Optional[float]], max_points: int = MAX_POINTS):
    """Bin-mean ``(ts, ys)`` down to at most ``max_points`` points; ``None`` stays a gap (NaN).

    Args:
        ts: sample times, s (ascending). ys: power, W, ``None`` = not measured.
        max_points: the most points returned (>= 1).

    Returns:
        ``(t_list, y_list)`` of floats; a bin whose samples are all ``None`` gives ``nan`` (a gap in
        the line, never 0).
    """
    n = len(ts)
    if n != len(ys):
        raise ValueError(f"ts has {n} values but ys has {len(ys)}; pass one power value per sample time")
    vals = [math.nan if y is None else float(y) for y in ys]
    if n <= max_points:
        return [float(t) for t in ts], vals
    out_t, out_y = [], []
    for b in range(max_points):
        lo, hi = b * n // max_points, (b + 1) * n // max_points
        if hi <= lo:
            continue
        seg = [v for v in vals[lo:hi] if not math.isnan(v)]
        out_t.append(sum(float(t) for t in ts[lo:hi]) / (hi - lo))
        out_y.append(sum(seg) / len(seg) if seg else math.nan)
    return out_t, out_y


def power_svg(nodes: Sequence[NodeSummary], job_start: float,
              marks: Optional[tuple[list, list]] = None) -> Optional[str]:
    """Draw each node's ``power_trace`` (rows ``[t, cpu_w, gpu_w, ram_w]``) as an SVG string.

    Args:
        nodes: node summaries; nodes with an empty trace are skipped; the first
            :data:`MAX_NODES` nodes with a trace are drawn.
        job_start: the job's start time, epoch s; the x axis is minutes since it.
        marks: ``(bands, stages)`` from :func:`slurm_energy.reporting.phases.plot_marks`: the
            outermost phases drawn as shaded, labelled bands, stages as dotted vertical lines.

    Returns:
        An ``<svg ...>...</svg>`` string (no XML prologue, ready to inline in HTML), or ``None``
        when no node has a trace or no power value is measured. Columns that are ``None`` throughout
        are not drawn (unmeasured is not 0 W).
    """
    traced = [n for n in nodes if n.power_trace]
    if not traced:
        return None
    series = []  # (label, colour, style, xs, ys)
    for k, node in enumerate(traced[:MAX_NODES]):
        ts = [row[0] for row in node.power_trace]
        for ci, cls in enumerate(TRACE_CLASSES, start=1):
            ys = [row[ci] if len(row) > ci else None for row in node.power_trace]
            if all(y is None for y in ys):
                continue
            t2, y2 = downsample(ts, ys)
            xs = [(t - job_start) / 60.0 for t in t2]
            label = cls.upper() if len(traced) == 1 else f"{cls.upper()} ({node.node})"
            series.append((label, _COLOURS[cls], _STYLES[k % len(_STYLES)], xs, y2))
    if not series:
        return None

    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure  # Figure without pyplot: no global state, thread-safe

    fig = Figure(figsize=(9, 3.4), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    for label, colour, style, xs, ys in series:
        ax.plot(xs, ys, style, color=colour, label=label, linewidth=1.4)
    if marks:
        _draw_marks(ax, *marks)
    ax.set_xlabel("time since job start (min)")
    ax.set_ylabel("job power (W)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right", fontsize=8, frameon=False, ncol=min(3, len(series)))
    if len(traced) > MAX_NODES:
        ax.set_title(f"first {MAX_NODES} of {len(traced)} nodes shown", fontsize=9)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    buf = io.StringIO()
    # text stays <text> (smaller, selectable; the browser's sans-serif font draws it)
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    start = svg.find("<svg")
    svg = svg[start:] if start >= 0 else svg
    # inline SVG: let CSS size it
    svg = re.sub(r'(<svg[^>]*?)\s(width|height)="[^"]*"', r"\1", svg, count=2)
    return svg


#: Most phase bands labelled on the plot (a label per band beyond this would be unreadable).
MAX_BAND_LABELS = 12


def _draw_marks(ax, bands, stages) -> None:
    """Shade each outermost phase (alternating greys, its name at the top when there are few) and
    draw each stage as a dotted line labelled with its fraction."""
    trans = ax.get_xaxis_transform()  # x in data (min), y in axes fraction
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * 1.18)  # headroom: phase names above the power lines
    for k, (a, b, name) in enumerate(bands):
        ax.axvspan(a, b, color="#6b7280" if k % 2 else "#9ca3af", alpha=0.15, linewidth=0, zorder=0)
        if len(bands) <= MAX_BAND_LABELS:
            ax.text((a + b) / 2, 0.98, name[:24], transform=trans, ha="center", va="top", fontsize=7,
                    color="#374151", clip_on=True)
    for t, name in stages:
        ax.axvline(t, color="#7c3aed", linestyle=":", linewidth=1.0)
        ax.text(t, 0.02, name, transform=trans, rotation=90, ha="right", va="bottom", fontsize=7, color="#7c3aed")
