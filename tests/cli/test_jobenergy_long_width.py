"""``jobenergy -l`` fits 120 columns on realistic records: a requeued array task on two GPU nodes
(NVML UUIDs are 40 characters, CPU model names 31), RAPL counters, the TDP model for RAM, default
PUE/CI rows and long error texts. The long texts are notes under their rows, wrapped; nothing is
lost (-P has them whole).

Values: device ids as the readers write them (NVML: the GPU's UUID, ``nvmlDeviceGetUUID``'s
``GPU-`` + 36-character form; RAPL: the powercap zone's directory name, slurm_energy/sampling/readers/
rapl.py), model names as /proc/cpuinfo ``model name`` and NVML ``nvmlDeviceGetName`` print them
(Intel Xeon Platinum 8480+, NVIDIA H100 80GB HBM3), covers text as accounting/summary.py writes it."""

import pytest

from slurm_energy.cli.jobenergy import main
from slurm_energy.model import Method
from tests.helpers.jobrecord_factory import device, finished, job_record, store_with

T0 = 1_700_000_000.0
GPU_UUIDS = ["GPU-3f6c1e2a-7b4d-11ee-9c2a-0242ac120002", "GPU-8d0b5a41-2c9e-4f7a-b1d3-6e2f90c4a715"]
XEON = "Intel(R) Xeon(R) Platinum 8480+"
H100 = "NVIDIA H100 80GB HBM3"
ERR = ("slurm write-back: sacct could not read job 715242's AdminComment (rc 1): sacct: error: "
       "resolve_ctls_from_dns_srv: res_nsearch error: Unknown host sacct: error: fetch_config: DNS SRV lookup "
       "failed sacct: error: _establish_config_source: failed to fetch config sacct: fatal: ; AdminComment not written")


def _node(node: str, attempt: int, start: float, end: float):
    devs = []
    for k in (0, 1):
        devs.append(device("cpu", 1.234e6 * (k + 1), method=Method.COUNTER, node=node, device_id=f"intel-rapl:{k}",
                           model=XEON, count=1, device_energy_j=4.1e6, coverage=0.998, wraps=3, dropped_samples=2,
                           covers=f"intel-rapl:{k} ({XEON}); counter; job share by cgroup CPU time / node busy CPU "
                                  "time", flags=["util_clamped"], unclamped={"node_busy_raw": 1.0123}))
    for k, uuid in enumerate(GPU_UUIDS):
        devs.append(device("gpu", 9.87e6, method=Method.POWER_INTEGRATION if k else Method.COUNTER, node=node,
                           device_id=uuid, model=H100, device_energy_j=9.87e6, coverage=1.0,
                           covers=f"{uuid} ({H100}); {'power_integration' if k else 'counter'}; GPU allocated to "
                                  "the job (or share by per-process utilisation)"))
    devs.append(device("ram", 3.3e5, node=node, device_id="ram-model", model="2015.6 GiB", coverage=0.97,
                       covers="ram-model (2015.6 GiB); tdp_estimate; job share by job memory / node used memory",
                       flags=["share_unknown"]))
    return job_record("715242", devs, node=f"{node}", start=start, end=end, expected=("gpu-n0123", "gpu-n0124"),
                      array_job_id="715219", array_task_id="23", restart_count=attempt, errors=[ERR],
                      node_fields={"req_mem_bytes": 480 * 1024 ** 3, "max_mem_bytes": 2_046_780 * 1024})


@pytest.fixture
def url(tmp_path, site_config, monkeypatch):
    site_config.write(bare=True, cluster_name="c1")  # no pue, no location: the default PUE and CI rows show
    recs = []
    for attempt, (s, e) in enumerate([(T0, T0 + 3600), (T0 + 4000, T0 + 90_000)]):
        a = _node("gpu-n0123", attempt, s, e)
        b = _node("gpu-n0124", attempt, s, e)
        r = finished(a.model_copy(update={"nodes": a.nodes + b.nodes}), pue=1.58, ci=475.0)
        r.carbon.defaults_used = ["pue", "ci"]  # config/carbon.py's texts for a site that sets neither
        r.carbon.pue_source = "DEFAULT: industry average PUE 1.58 (Uptime Institute Global Data Center Survey 2023)"
        r.carbon.ci_source = ("DEFAULT: world average 475 gCO2e/kWh (IEA Global Energy & CO2 Status Report 2019); no "
                              "datacenter, site location or geolocation configured -- set location.country or "
                              "datacenters.<name>.carbon_intensity in site.yaml")
        recs.append(r)
    return store_with(tmp_path, *recs)


@pytest.mark.parametrize("columns", [None, "120", "100"])
def test_long_fits_the_terminal_and_120_by_default(url, capsys, monkeypatch, columns):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)  # a pipe: shutil's fallback, 120
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert main(["--store", url, "-l", "715219_23"]) == 0
    lines = capsys.readouterr().out.splitlines()
    limit = int(columns or 120)
    assert max(len(ln) for ln in lines) <= limit, max(lines, key=len)
    # the rows: 2 attempts x 2 nodes x 5 devices, then per attempt pue, ci and the error
    rows = [ln for ln in lines[2:] if not ln.startswith(" " * 12)]
    assert sum(1 for ln in rows if ln.split()[2] in ("cpu", "gpu", "ram")) == 20
    assert [ln.split()[2] for ln in rows if ln.split()[1] == "-"] == ["pue", "ci", "error"] * 2
    assert [ln.split()[0] for ln in rows][:1] == ["715219_23#0"]
    # nothing lost: the UUIDs, the model, the flags and the whole error are in the notes
    text = " ".join(ln.strip() for ln in lines)
    for want in (*GPU_UUIDS, XEON, "util_clamped, node_busy_raw=1.01", "wraps 3, 2 dropped samples",
                 "Uptime Institute Global Data Center Survey 2023", "datacenters.<name>.carbon_intensity in site.yaml",
                 f"1: {ERR}"):
        assert want in text


def test_the_old_one_line_rows_were_wider_than_120(url, capsys):
    # the same rows with every field on one line (-l -o all fields), as -l printed them before: ~250
    from slurm_energy.cli import jobenergy_format as F

    assert main(["--store", url, "-l", "-o", ",".join(F.LONG_FIELDS[:-1]), "715219_23"]) == 0
    assert max(len(ln) for ln in capsys.readouterr().out.splitlines()) > 120


def test_parsable_long_keeps_every_field_whole(url, capsys):
    assert main(["--store", url, "-l", "-P", "715219_23"]) == 0
    lines = capsys.readouterr().out.splitlines()
    from slurm_energy.cli import jobenergy_format as F

    assert lines[0] == "|".join(F.LONG_FIELDS)
    gpu = [ln.split("|") for ln in lines[1:] if ln.split("|")[2] == "gpu"]
    assert gpu[0][3] == GPU_UUIDS[0] and gpu[0][4] == H100 and gpu[0][13:15] == ["480G", "2046780K"]
    assert any(ln.endswith(ERR) for ln in lines)
