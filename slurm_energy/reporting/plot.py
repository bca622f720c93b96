"""Power-over-time plot for the report, as an inline SVG string.

matplotlib is imported lazily (only the report step pays for it) and always with the non-interactive
Agg backend, so it works in an Epilog with no display.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from slurm_energy.model import JobTrace, NodeSummary

if TYPE_CHECKING:  # matplotlib is imported lazily, when a plot is drawn
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: ``(bands, stages)`` of :func:`slurm_energy.reporting.phases.plot_marks`: outermost phases
#: ``(start_min, end_min, name)`` and stages ``(t_min, label)``, minutes since the job's start.
Marks: TypeAlias = "tuple[list[tuple[float, float, str]], list[tuple[float, str]]]"
#: ``(spans, bound_w)`` of :func:`slurm_energy.reporting.gpu_idle.plot_spans`: idle stretches
#: ``(start_min, end_min)`` and the GPUs' idle-draw bound, W (None: not known).
Idle: TypeAlias = "tuple[list[tuple[float, float]], float | None]"
#: One drawn line: (label, colour, line style, xs in the plot's time unit, ys W; NaN = gap).
Series: TypeAlias = "tuple[str, str, str, list[float], list[float]]"

#: Columns of NodeSummary.power_trace rows after the time column, W.
TRACE_CLASSES = ("cpu", "gpu", "ram")
_COLOURS = {"cpu": "#1f77b4", "gpu": "#2ca02c", "ram": "#ff7f0e"}
_STYLES = ("-", "--", ":", "-.")
#: At most this many points per line are drawn (bin means beyond it), keeping the SVG small.
MAX_POINTS = 1500
#: At most this many nodes are drawn separately; the rest are named in the title.
MAX_NODES = 4


def downsample(ts: Sequence[float], ys: Sequence[float | None],
               max_points: int = MAX_POINTS) -> tuple[list[float], list[float]]:
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
    out_t: list[float] = []
    out_y: list[float] = []
    for b in range(max_points):
        lo, hi = b * n // max_points, (b + 1) * n // max_points
        if hi <= lo:
            continue
        seg = [v for v in vals[lo:hi] if not math.isnan(v)]
        out_t.append(sum(float(t) for t in ts[lo:hi]) / (hi - lo))
        out_y.append(sum(seg) / len(seg) if seg else math.nan)
    return out_t, out_y


def power_svg(nodes: Sequence[NodeSummary], job_start: float,
              marks: Marks | None = None,
              idle: Idle | None = None, job: JobTrace | None = None) -> str | None:
    """Draw each node's ``power_trace`` (rows ``[t, cpu_w, gpu_w, ram_w]``) as an SVG string.

    Args:
        nodes: node summaries; nodes with an empty trace are skipped; the first
            :data:`MAX_NODES` nodes with a trace are drawn.
        job_start: the job's start time, epoch s; the x axis is the time since it, in seconds,
            minutes or hours to fit the job (:func:`time_unit`). Lines far below the tallest go on
            a second axis (:func:`near_zero_series`); the legend sits below the plot.
        marks: ``(bands, stages)`` from :func:`slurm_energy.reporting.phases.plot_marks`: the
            outermost phases drawn as shaded, labelled bands, stages as dotted vertical lines.
        idle: ``(spans, bound_w)`` from :func:`slurm_energy.reporting.gpu_idle.plot_spans`: the
            stretches a GPU was allocated but idle (minutes since the start) as a hatched band, and
            the GPUs' idle-draw bound (W) as a dashed line, summed over the same GPUs as the GPU line
            it is drawn beside.
        job: a job of several nodes' :class:`JobTrace` (``JobRecord.job_trace``): the job summed
            above, the nodes as a band and a few lines below (:func:`job_figure`).

    Returns:
        An ``<svg ...>...</svg>`` string (no XML prologue, ready to inline in HTML), or ``None``
        when no node has a trace or no power value is measured. Columns that are ``None`` throughout
        are not drawn (unmeasured is not 0 W).
    """
    fig = power_figure(nodes, job_start, marks, idle, job)
    return None if fig is None else svg_text(fig)


def svg_text(fig: Figure) -> str:
    """A matplotlib ``Figure`` as inline SVG: no XML prologue, no date, no width/height (CSS sizes it),
    text kept as ``<text>`` (smaller, selectable) and never rendered by LaTeX (user text in it)."""
    import matplotlib

    buf = io.StringIO()
    # text stays <text> (smaller, selectable; the browser's sans-serif font draws it)
    with matplotlib.rc_context({"svg.fonttype": "none", "text.usetex": False}):  # never LaTeX on user text
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    start = svg.find("<svg")
    svg = svg[start:] if start >= 0 else svg
    return re.sub(r'(<svg[^>]*?)\s(width|height)="[^"]*"', r"\1", svg, count=2)


def power_figure(nodes: Sequence[NodeSummary], job_start: float, marks: Marks | None = None,
                 idle: Idle | None = None, job: JobTrace | None = None) -> Figure | None:
    """The matplotlib ``Figure`` :func:`power_svg` draws (same arguments), or ``None`` when there is
    nothing to draw. Its axes: ``fig.axes[0]`` power (W), ``fig.axes[1]`` the right axis for small
    lines when there is one. With ``job`` (a job of several nodes, :class:`JobTrace`): the whole
    job above (:func:`job_figure`), the nodes below."""
    if job is not None and job.t:
        return job_figure(job, nodes, job_start, marks, idle)
    traced = [n for n in nodes if timed_rows(n.power_trace)]
    if not traced:
        return None
    span_s = max((t - job_start for n in traced for t, _ in timed_rows(n.power_trace)), default=0.0)
    unit, unit_s = time_unit(span_s)
    series: list[Series] = []
    for k, node in enumerate(traced[:MAX_NODES]):
        rows = timed_rows(node.power_trace)
        ts = [t for t, _ in rows]
        for ci, cls in enumerate(TRACE_CLASSES, start=1):
            ys = [row[ci] if len(row) > ci else None for _, row in rows]
            if all(y is None for y in ys):
                continue
            t2, y2 = downsample(ts, ys)
            xs = [(t - job_start) / unit_s for t in t2]
            label = cls.upper() if len(traced) == 1 else f"{cls.upper()} ({node.node})"
            series.append((label, _COLOURS[cls], _STYLES[k % len(_STYLES)], xs, y2))
    if not series:
        return None
    fig = _figure(3.8)
    ax = fig.add_subplot(1, 1, 1)
    handles, _ = _draw_power(ax, series, marks, idle, unit, unit_s, "job power")
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=8, frameon=False,
              ncol=min(4, len(handles)))
    if len(traced) > MAX_NODES:
        ax.set_title(f"first {MAX_NODES} of {len(traced)} nodes shown", fontsize=9)
    fig.tight_layout()
    return fig


def _figure(height_in: float) -> Figure:
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure  # Figure without pyplot: no global state, thread-safe

    return Figure(figsize=(9, height_in), dpi=100)


def _draw_power(ax: Axes, series: list[Series], marks: Marks | None, idle: Idle | None, unit: str, unit_s: float,
                what: str) -> tuple[list[Artist], Axes | None]:
    """Draw ``series`` (label, colour, style, xs, ys) on ``ax`` (small ones on a right axis), the
    phase marks and the GPU-idle band and bound; (legend handles, the right axis or None)."""
    small = near_zero_series([ys for *_, ys in series])
    ax2 = ax.twinx() if small else None
    handles: list[Artist] = []
    for i, (label, colour, style, xs, ys) in enumerate(series):
        target = ax2 if i in small and ax2 is not None else ax
        lab = f"{label} (right axis)" if i in small else label
        handles += target.plot(xs, ys, style, color=colour, label=lab, linewidth=1.4)
    if marks:  # marks come in minutes since the job's start
        bands, stages = marks
        f = 60.0 / unit_s
        _draw_marks(ax, [(a * f, b * f, n) for a, b, n in bands], [(t * f, n) for t, n in stages])
    if idle and (idle[0] or idle[1] is not None):
        gpu_i = next((i for i, (label, *_) in enumerate(series) if label.startswith("GPU")), None)
        handles += _draw_idle(ax2 if gpu_i in small and ax2 is not None else ax, idle, 60.0 / unit_s)
    ax.set_xlabel(f"time since job start ({unit})")
    ax.set_xlim(left=0)
    ax.set_ylabel(f"{what} (W)")
    ax.set_ylim(bottom=0)
    if ax2 is not None:
        ax2.set_ylabel(f"{what}, small lines (W)")
        ax2.set_ylim(bottom=0)
        ax2.spines["top"].set_visible(False)
    ax.grid(True, alpha=0.3)
    for side in ("top",) + (() if ax2 is not None else ("right",)):
        ax.spines[side].set_visible(False)
    return handles, ax2


def timed_rows(trace: Sequence[Sequence[float | None]]) -> list[tuple[float, Sequence[float | None]]]:
    """``(t, row)`` for each power-trace row that has its time (a row ``[None, ...]`` in a stored
    record is skipped: it cannot be placed on the time axis)."""
    return [(t, row) for row in trace if row and (t := row[0]) is not None]


def node_total(row: Sequence[float | None]) -> float | None:
    """A trace row's total power, W: its classes with a value summed (None when none has one)."""
    vals = [v for v in row[1:] if v is not None]
    return sum(vals) if vals else None


def job_figure(job: JobTrace, nodes: Sequence[NodeSummary], job_start: float,
               marks: Marks | None = None, idle: Idle | None = None) -> Figure | None:
    """A job of several nodes: above, the whole job's power per class summed over its nodes, with
    the GPU-idle band and the idle-draw bound summed over all the job's GPUs (the same scale as the
    summed GPU line); below, each node's total power as a band from the lowest to the highest node
    in each time bucket, and the few nodes the record keeps (``job.shown_nodes``) as lines."""
    span_s = max((t - job_start for t in job.t), default=0.0)
    unit, unit_s = time_unit(span_s)
    xs = [(t - job_start) / unit_s for t in job.t]
    series: list[Series] = []
    for ci, cls in enumerate(TRACE_CLASSES):
        ys = [row[ci] if len(row) > ci else None for row in job.sum_w]
        if all(y is None for y in ys):
            continue
        series.append((f"{cls.upper()}, all nodes", _COLOURS[cls], "-", xs,
                       [math.nan if y is None else float(y) for y in ys]))
    if not series:
        return None
    fig = _figure(7.6)
    ax = fig.add_subplot(2, 1, 1)
    handles, _ = _draw_power(ax, series, marks, idle, unit, unit_s, "job power")
    ax.set_title(f"whole job: power summed over its {job.nodes} nodes", fontsize=9)
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, frameon=False,
              ncol=min(4, len(handles)))
    axn = fig.add_subplot(2, 1, 2, sharex=ax)
    nh: list[Artist] = [axn.fill_between(xs, job.node_min_w, job.node_max_w, color="#9ca3af", alpha=0.45, linewidth=0,
                           label=f"lowest to highest node ({job.nodes} nodes)")]
    shown = [n for n in nodes if n.node in set(job.shown_nodes) and timed_rows(n.power_trace)]
    for k, node in enumerate(shown):
        rows = timed_rows(node.power_trace)
        nx = [(t - job_start) / unit_s for t, _ in rows]
        ny = [math.nan if (v := node_total(row)) is None else v for _, row in rows]
        nh += axn.plot(nx, ny, _STYLES[k % len(_STYLES)], color="#111827", linewidth=1.0, label=f"node {node.node}")
    if marks:
        bands, _ = marks
        f = 60.0 / unit_s
        for k, (a, b, _n) in enumerate(bands):
            axn.axvspan(a * f, b * f, color="#6b7280" if k % 2 else "#9ca3af", alpha=0.10, linewidth=0, zorder=0)
    axn.set_xlabel(f"time since job start ({unit})")
    axn.set_ylabel("node power, CPU+GPU+RAM (W)")
    axn.set_ylim(bottom=0)
    axn.grid(True, alpha=0.3)
    axn.set_title("per node: total power", fontsize=9)
    for side in ("top", "right"):
        axn.spines[side].set_visible(False)
    axn.legend(handles=nh, loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, frameon=False,
               ncol=min(5, len(nh)))
    fig.tight_layout()
    return fig


def _draw_idle(ax: Axes, idle: Idle, f: float) -> list[Artist]:
    """The GPU-idle band (hatched, red) and the idle-draw bound (dashed); their legend handles."""
    spans, bound = idle
    out: list[Artist] = []
    for k, (a, b) in enumerate(spans):
        h = ax.axvspan(a * f, b * f, facecolor="#fecaca", edgecolor="#dc2626", hatch="//", alpha=0.35, linewidth=0,
                       zorder=0, label="GPU allocated but idle" if k == 0 else None)
        if k == 0:
            out.append(h)
    if bound is not None:
        out += [ax.axhline(bound, color="#dc2626", linestyle="--", linewidth=1.0, label=f"GPU idle-draw bound ({bound:.0f} W)")]
    return out


#: A line whose peak is below this fraction of the tallest line's peak is drawn on a second
#: (right) y axis with its own scale, so it does not lie flat on zero (e.g. RAM 3 W beside GPU 300 W).
NEAR_ZERO_FRACTION = 0.1


def time_unit(span_s: float) -> tuple[str, float]:
    """The plot's time unit for a job of ``span_s`` seconds: ``("s", 1)`` up to 3 min, ``("min", 60)``
    up to 3 h, else ``("h", 3600)`` -- a 43 s job is drawn in seconds, a day-long one in hours."""
    if span_s <= 180:
        return "s", 1.0
    if span_s <= 3 * 3600:
        return "min", 60.0
    return "h", 3600.0


def near_zero_series(values: Sequence[Sequence[float | None]]) -> set[int]:
    """Indices of series whose peak (W) is below :data:`NEAR_ZERO_FRACTION` of the tallest peak;
    empty when every series is comparable (or only one is drawn)."""
    peaks = [max((v for v in ys if v is not None and not math.isnan(v)), default=0.0) for ys in values]
    top = max(peaks, default=0.0)
    if top <= 0 or len(peaks) < 2:
        return set()
    small = {i for i, p in enumerate(peaks) if p < NEAR_ZERO_FRACTION * top}
    return small if len(small) < len(peaks) else set()


#: Most phase bands labelled on the plot (a label per band beyond this would be unreadable).
MAX_BAND_LABELS = 12


def _draw_marks(ax: Axes, bands: list[tuple[float, float, str]], stages: list[tuple[float, str]]) -> None:
    """Shade each outermost phase (alternating greys; its name at the top when there are few and
    the band is wide enough to hold it) and draw each stage as a dotted line labelled with its
    fraction."""
    trans = ax.get_xaxis_transform()  # x in data (min), y in axes fraction
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * 1.18)  # headroom: phase names above the power lines
    x0, x1 = ax.get_xlim()
    for k, (a, b, name) in enumerate(bands):
        ax.axvspan(a, b, color="#6b7280" if k % 2 else "#9ca3af", alpha=0.15, linewidth=0, zorder=0)
        if len(bands) <= MAX_BAND_LABELS and (b - a) >= 0.06 * (x1 - x0):
            # a phase name is the job's user's text: drawn as text, never as mathtext ("$\\frac..."$)
            ax.text((a + b) / 2, 0.98, name[:24], transform=trans, ha="center", va="top", fontsize=7,
                    color="#374151", clip_on=True, parse_math=False, usetex=False)
    for t, name in stages:
        ax.axvline(t, color="#7c3aed", linestyle=":", linewidth=1.0)
        ax.text(t, 0.02, name, transform=trans, rotation=90, ha="right", va="bottom", fontsize=7, color="#7c3aed",
                parse_math=False, usetex=False)
