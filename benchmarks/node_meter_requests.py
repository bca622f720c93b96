#!/usr/bin/env python3
"""BMC requests per node per minute with 1 and with 32 concurrent jobs: they must be equal.

Each job is a live "sampler" process (its ``jobs/<id>-r0/sampler-n1.pid`` in a scratch spool) whose
start calls :func:`slurm_energy.slurm.nodemeter.ensure_running`, as a real sampler does; the node
meter is a Redfish service on 127.0.0.1 (a stdlib HTTP server counting GETs of the chassis' Power
resource, one per meter reading). The real meter process (``python -m slurm_energy.slurm.nodemeter``)
reads it at ``node_meter.interval_s`` = 1 s for ``WINDOW_S`` seconds, then the jobs end and it leaves.

Run: python benchmarks/node_meter_requests.py   (about 2 x (WINDOW_S + 3) s)
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import ClassVar

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

WINDOW_S = 30.0


class _Bmc(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[dict[str, int]] = {}
    power_at: ClassVar[list[float]] = []

    def do_GET(self):
        self.hits[self.path] = self.hits.get(self.path, 0) + 1
        if self.path.endswith("/Power"):
            self.power_at.append(time.monotonic())
        docs = {"/redfish/v1/Chassis": {"Members": [{"@odata.id": "/redfish/v1/Chassis/1"}]},
                "/redfish/v1/Chassis/1": {"Power": {"@odata.id": "/redfish/v1/Chassis/1/Power"}},
                "/redfish/v1/Chassis/1/Power": {"PowerControl": [{"PowerConsumedWatts": 420}]}}
        body = json.dumps(docs.get(self.path, {})).encode()
        self.send_response(200 if self.path in docs else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def run(jobs: int) -> tuple[float, int]:
    from slurm_energy.config import load_site_config
    from slurm_energy.slurm import nodemeter

    _Bmc.hits, _Bmc.power_at = {}, []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Bmc)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as d:
        spool = os.path.join(d, "spool")
        os.makedirs(spool, mode=0o700)
        cred = os.path.join(d, "cred")
        with open(cred, "w") as f:
            f.write("root:calvin\n")
        os.chmod(cred, 0o600)
        site = os.path.join(d, "site.yaml")
        with open(site, "w") as f:
            f.write(f"paths: {{spool_dir: {spool}, log_dir: {d}/log}}\nnode_meter:\n  source: redfish\n  interval_s: 1\n"
                    f"  redfish: {{url: 'http://127.0.0.1:{srv.server_port}', credentials_file: {cred}}}\n")
        os.makedirs(os.path.join(d, "log"))
        env = {**os.environ, "SLURM_ENERGY_CONFIG": site, "PYTHONPATH": REPO}
        cfg = load_site_config(site)
        samplers, meters = [], []
        for j in range(jobs):
            p = subprocess.Popen(["sleep", "600"])
            samplers.append(p)
            jd = os.path.join(spool, "jobs", f"{100 + j}-r0")
            os.makedirs(jd)
            with open(os.path.join(jd, "sampler-n1.pid"), "w") as f:
                f.write(str(p.pid))
        for _ in range(jobs):  # every job's sampler start asks for the node's meter process
            nodemeter.ensure_running(cfg, spool, "n1", start=lambda argv: meters.append(subprocess.Popen(
                [sys.executable, *argv], env=env, cwd=REPO)))
        time.sleep(WINDOW_S)
        at = list(_Bmc.power_at)  # the rate between the first and last reading (process start-up left out)
        for p in samplers:
            p.kill()
            p.wait()
        for m in meters:
            m.wait(30)  # leaves once no job runs on the node
    srv.shutdown()
    return (len(at) - 1) * 60.0 / (at[-1] - at[0]), len(meters)


def main() -> None:
    for jobs in (1, 32):
        per_min, started = run(jobs)
        print(f"{jobs:>2} concurrent jobs: {per_min:.1f} BMC power requests/min "
              f"(meter process started {started} time(s))")


if __name__ == "__main__":
    main()
