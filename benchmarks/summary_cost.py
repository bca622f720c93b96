"""Cost of a long job's node summary, report and interim summaries; bytes per sample.

Builds the sample file of a 24 h job sampled every 5 s (17,280 rows) on a node with 2 RAPL packages
and 8 NVIDIA GPUs (fake counters: the rows the real RAPL and NVML readers write, values advancing
as a busy node's would: RAPL wrapping at its range, GPU power, utilisation, memory and per-process
utilisation varying), written by the real :class:`~slurm_energy.sampling.samplefile.SampleWriter`,
and the same rows in the old JSON-lines format (what sample files held before the compact format;
still read). Prints, for each format:

* bytes per sample;
* parse: the file -> columns (:func:`read_sample_table`);
* summarise: :func:`slurm_energy.pipeline.measure_node` (the node's summary, as the finalizer runs it);
* report: :func:`finalise_job` + the HTML and CSV report of the record (and the first one apart:
  it imports matplotlib and compiles the templates, once per finalizer process);
* interim: one running summary (what the sampler's interim flush computes; median of 30), at hour 1 and at hour
  24 of the job, each after another minute of rows (12) was appended: must be flat.

CPU seconds (process time: the machine is shared), medians of ``--repeat`` runs (default 3); the
benchmark's own generated rows are frozen out of the garbage collector (a finalizer does not hold
them; scanning them added up to 0.3 s to the timings).

    python benchmarks/summary_cost.py [--hours 24] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time

# the checkout's test helpers (tests.helpers), after PYTHONPATH and the installed package
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from slurm_energy.accounting.running import RunningSummary
from slurm_energy.config import SiteConfig
from slurm_energy.core import DeviceStatic, JobMeta
from slurm_energy.pipeline import NodeObservation, finalise_job, measure_node
from slurm_energy.sampling.samplefile import SampleWriter, read_sample_table
from tests.helpers.samplefile_rows import legacy_write, node_rows

INTERVAL_S = 5.0


def _cpu(fn, repeat: int) -> tuple[float, object]:
    """Median CPU seconds of ``fn()`` (process time: the machine is shared) and its last result."""
    times, out = [], None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        times.append(time.process_time() - t)
    return statistics.median(times), out


def _summary(samples, static, t0, t1, site):
    obs = NodeObservation("gpu001", samples, static, t0, t1, cpus_alloc=64)
    return measure_node(obs, JobMeta(job_id="4242", cluster="bench", user="alice"), site, interval_s=INTERVAL_S)


def _report(rec, site):
    from slurm_energy.reporting.report import render_csv, render_html

    job = finalise_job([rec], site)
    render_html(job)
    render_csv(job)
    return job


def _write(path: str, rows: list, fmt: str) -> None:
    if fmt == "old":
        legacy_write(path, rows)
        return
    w = SampleWriter(path, fsync=False)
    for r in rows:
        w.write(r)
    w.close()


class _Interim:
    """A running summary of a sample file written up to ``hour`` of the job (rows summed as the
    sampler would have), to which :meth:`step` adds a minute of rows (12) and times one update."""

    def __init__(self, path: str, rows: list, statics: list, hour: int, steps: int):
        self.rows, self.k = rows, int(hour * 3600 / INTERVAL_S) - 12 * steps
        _write(path, rows[:self.k], "new")
        self.running = RunningSummary(path)
        self.kw = {"job_id": "4242", "node": "gpu001", "start_time": rows[0]["t"], "statics": statics,
                   "cpus_alloc": 64, "interval_s": INTERVAL_S}
        self._flush(rows[self.k - 1]["t"])
        self.w = SampleWriter(path, fsync=False)

    def _flush(self, end_time: float) -> None:
        """The sampler's interim flush: the new rows summed, then the summary so far."""
        self.running.update(statics=self.kw["statics"], cpus_alloc=64)
        self.running.summary(end_time=end_time, **self.kw)

    def step(self) -> float:
        for r in self.rows[self.k:self.k + 12]:
            self.w.write(r)
        self.k += 12
        c = time.process_time()
        self._flush(self.rows[self.k - 1]["t"])
        return time.process_time() - c


def _interim_costs(tmp: str, rows: list, statics: list, hours: tuple[int, int], steps: int = 30) -> list[float]:
    """Median CPU seconds of one interim update after a minute of new rows at each of ``hours``,
    the updates interleaved (the machine's state is the same for both)."""
    gc.collect()
    gc.freeze()  # what the runs before left, out of the collector's way (a sampler has none of it)
    runs = [_Interim(os.path.join(tmp, f"interim-{h}"), rows, statics, h, steps) for h in hours]
    costs: list[list[float]] = [[] for _ in hours]
    for _ in range(steps):
        for c, r in zip(costs, runs):
            c.append(r.step())
    for r in runs:
        r.w.close()
    return [statistics.median(c) for c in costs]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    site = SiteConfig()
    rows, static = node_rows(int(a.hours * 3600 / INTERVAL_S) + 1, INTERVAL_S)
    statics = [DeviceStatic(**d) for d in static["devices"]]
    gc.collect()
    gc.freeze()  # the generated rows (~1M objects) are this benchmark's, not a finalizer's: not scanned
    t0, t1 = rows[0]["t"], rows[-1]["t"]
    print(f"{len(rows)} rows ({a.hours:g} h at {INTERVAL_S:g} s), 2 RAPL packages + 8 GPUs; CPU seconds, "
          f"medians of {a.repeat}")
    print(f"{'':>18} {'B/sample':>9} {'parse':>7} {'summary':>8} {'report':>7} {'total':>7}")
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        got = {}
        for label, fmt in (("old JSON lines", "old"), ("compact file", "new")):
            path = os.path.join(tmp, f"samples-{fmt}")
            _write(path, rows, fmt)
            size = os.path.getsize(path) / len(rows)
            t_parse, samples = _cpu(lambda p=path: read_sample_table(p), a.repeat)
            t_sum, rec = _cpu(lambda s=samples: _summary(s, static, t0, t1, site), a.repeat)
            if first is None:  # the process's first report imports matplotlib and jinja2, compiles templates
                first, _ = _cpu(lambda r=rec: _report(r, site), 1)
            t_rep, _ = _cpu(lambda r=rec: _report(r, site), a.repeat)
            got[label] = rec
            print(f"{label:>18} {size:9.0f} {t_parse:7.3f} {t_sum:8.3f} {t_rep:7.3f} {t_parse + t_sum + t_rep:7.3f}")
        print(f"a finalizer process's first report, imports included: {first:.3f} s")
        e = [{d.device_id: d.energy_j for d in r.nodes[0].devices} for r in got.values()]
        same = all(abs(x[k] - e[0][k]) <= 1e-9 * abs(e[0][k]) for x in e for k in e[0])
        print(f"device energies agree in both formats (rel. 1e-9): {same}")
        if a.hours >= 2:
            hn = int(a.hours)
            h1, hN = _interim_costs(tmp, rows, statics, (1, hn))
            print(f"interim summary after 12 new rows (median of 30, interleaved): hour 1 {h1 * 1e3:.2f} ms, "
                  f"hour {hn} {hN * 1e3:.2f} ms CPU (ratio {hN / h1:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
