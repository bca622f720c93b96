"""Report step cost: render HTML + CSV for long and wide jobs; prints seconds and sizes.

Target: a 7-day job sampled every 5 s (120 960 trace rows) renders in well under the Epilog's
budget (a few seconds) and the HTML stays small (the plot is downsampled to <= 1500 points/line).

    /opt/slurm-energy/venv/bin/python benchmarks/bench_report.py
"""

from __future__ import annotations

import os
import sys
import time

# the checkout's test helpers (tests.helpers), after PYTHONPATH and the installed package
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from slurm_energy.reporting.report import render_csv, render_html
from tests.helpers.report_records import sample_record


def _long(days: float, interval_s: float = 5.0):
    rec = sample_record()
    n = int(days * 86400 / interval_s)
    t0 = rec.start_time
    rec.nodes[0].power_trace = [[t0 + k * interval_s, 150.0 + (k % 100), None, 11.9] for k in range(n)]
    rec.end_time = t0 + n * interval_s
    return rec, n


def _wide(n_nodes: int):
    rec = sample_record()
    base = rec.nodes[0]
    rec.nodes = []
    for i in range(n_nodes):
        nd = base.model_copy(deep=True)
        nd.node = f"node{i:03d}"
        rec.nodes.append(nd)
    return rec


def _time(label, rec):
    t = time.perf_counter()
    html = render_html(rec)
    t_html = time.perf_counter() - t
    t = time.perf_counter()
    render_csv(rec)
    t_csv = time.perf_counter() - t
    print(f"{label:<34} html {t_html:7.3f} s ({len(html) / 1024:7.1f} KiB)  csv {t_csv * 1e3:6.2f} ms")


if __name__ == "__main__":
    render_html(sample_record())  # warm-up: matplotlib import, template compile
    _time("1 node, 1 h (61 trace rows)", sample_record())
    rec, n = _long(1)
    _time(f"1 node, 1 day ({n} rows)", rec)
    rec, n = _long(7)
    _time(f"1 node, 7 days ({n} rows)", rec)
    _time("64 nodes, 1 h", _wide(64))
