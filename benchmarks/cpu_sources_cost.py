"""Sampler loop, hook imports and reader set-up of two source trees in one run, interleaved.

What the CPU sources (RAPL on every server layout, hwmon power meters, NVML scopes) could slow, each
measured for a base tree (e.g. a git worktree of main) and this tree in turn (alternating which goes
first), round after round, so both see the same machine load; the ratio this/base of the medians
and of the minima (the least disturbed run, for a shared machine) is printed per measure:

* sampler loop: ``benchmarks/sampler_cost.py --no-fsync`` of each tree (2 RAPL sockets + 8 fake
  GPUs, the real Sampler): CPU ms per sample;
* hook imports: ``python -I -S`` importing ``slurm_energy.slurm.hooks.prolog`` and ``.epilog`` (what every Prolog and
  Epilog imports first): CPU ms, in a fresh process each time;
* Prolog reader set-up (its full-way reading): ``python -I`` importing the reader modules and
  building the node's readers (``sampling.setup.build_readers``) then one read, on a fake 2-socket
  RAPL tree, and on a node without RAPL (the TDP model; this tree first looks for hwmon meters):
  CPU ms, fresh process each time.

Usage: python benchmarks/cpu_sources_cost.py --base /tmp/main-wt [--tree .] [--rounds 7] [--samples 300]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

_IMPORTS = """import os, sys, time
sys.path.insert(0, sys.argv[1])
split = os.path.isdir(os.path.join(sys.argv[1], "slurm_energy", "slurm", "hooks"))  # a tree from before the move: hookentry
t0 = time.process_time()
if split:
    import slurm_energy.slurm.hooks.epilog, slurm_energy.slurm.hooks.prolog
else:
    from slurm_energy.slurm import hookentry
print(1000 * (time.process_time() - t0))
"""

_SETUP = """import sys, time
sys.path.insert(0, sys.argv[1])
t0 = time.process_time()
from slurm_energy.devices.hardware import HardwareConfig
from slurm_energy.sampling.setup import build_readers
readers, _ = build_readers(HardwareConfig(rapl_root=sys.argv[2]))
for r in readers:
    r.read()
    r.close()
print(1000 * (time.process_time() - t0))
"""


def _fake_rapl(tmp: str, tree: str) -> str:
    sys.path.insert(0, tree)  # its tests.fakes
    from tests.fakes.powercap import Zone, build_tree

    return build_tree(tmp, [Zone("intel-rapl:0", "package-0", energy_uj=1_000, max_power_uw={0: 205_000_000}),
                            Zone("intel-rapl:0:0", "dram", energy_uj=10),
                            Zone("intel-rapl:1", "package-1", energy_uj=2_000, max_power_uw={0: 205_000_000}),
                            Zone("intel-rapl:1:0", "dram", energy_uj=20)])


def _ms(argv: list[str], env: dict | None = None, cwd: str = "/") -> float:
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env, cwd=cwd).stdout
    return float(out.strip().splitlines()[-1])


def _sampler_ms(tree: str, samples: int) -> float:
    out = subprocess.run([sys.executable, os.path.join(tree, "benchmarks", "sampler_cost.py"), "--samples",
                          str(samples), "--no-fsync"], capture_output=True, text=True, check=True, cwd=tree,
                         env=dict(os.environ, PYTHONPATH=tree)).stdout
    m = re.search(r"CPU time per sample :\s+([\d.]+) ms", out)
    if m is None:
        raise RuntimeError(f"sampler_cost.py printed no CPU time: {out!r}")
    return float(m.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the tree to compare with (a git worktree of main)")
    ap.add_argument("--tree", default=".", help="this tree (default: the current directory)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--imports", type=int, default=5, help="fresh processes per tree and round for each import measure")
    a = ap.parse_args(argv)
    trees = {"base": os.path.abspath(a.base), "this": os.path.abspath(a.tree)}
    res: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
    with tempfile.TemporaryDirectory() as tmp:
        rapl = _fake_rapl(tmp, trees["this"])
        none = os.path.join(tmp, "no-powercap")
        for tree in trees.values():  # warm-up, not counted: byte-compiles a fresh worktree's modules
            _sampler_ms(tree, 5)
            _ms([sys.executable, "-I", "-S", "-c", _IMPORTS, tree])
            _ms([sys.executable, "-I", "-c", _SETUP, tree, rapl])
        for k in range(a.rounds):
            order = list(trees.items()) if k % 2 == 0 else list(trees.items())[::-1]  # no order bias
            for name, tree in order:
                res[name].setdefault("sampler loop, CPU ms/sample", []).append(_sampler_ms(tree, a.samples))
            for j in range(a.imports):
                for name, tree in (order if j % 2 == 0 else order[::-1]):
                    r = res[name]
                    r.setdefault("hook imports (prolog + epilog modules), CPU ms", []).append(
                        _ms([sys.executable, "-I", "-S", "-c", _IMPORTS, tree]))
                    r.setdefault("Prolog reader set-up + read, RAPL node, CPU ms", []).append(
                        _ms([sys.executable, "-I", "-c", _SETUP, tree, rapl]))
                    r.setdefault("Prolog reader set-up + read, no RAPL, CPU ms", []).append(
                        _ms([sys.executable, "-I", "-c", _SETUP, tree, none]))
    print(f"base = {trees['base']}\nthis = {trees['this']}\n{a.rounds} rounds, interleaved; load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"{'measure':52s} {'median base':>11s} {'this':>9s} {'ratio':>6s}   {'min base':>9s} {'this':>9s} {'ratio':>6s}")
    for k in res["base"]:
        b, t = statistics.median(res["base"][k]), statistics.median(res["this"][k])
        bm, tm = min(res["base"][k]), min(res["this"][k])
        print(f"{k:52s} {b:11.3f} {t:9.3f} {t / b:6.3f}   {bm:9.3f} {tm:9.3f} {tm / bm:6.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
