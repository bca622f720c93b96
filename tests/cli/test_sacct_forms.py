"""sacct's forms and order: array tasks in sacct's order, a default table as narrow as sacct's,
durations as sacct prints them, rollup jobs apart from attempts, predict naming what to give."""

import pytest

from slurm_energy.cli.main import main as se_main
from slurm_energy.reporting.scale import format_duration
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record, run_jobenergy

T0 = 1_706_745_600.0  # 2024-02-01T00:00:00Z


@pytest.fixture
def url(tmp_path, site_config, monkeypatch):
    site_config.write(bare=True, cluster_name="c1")
    u = f"sqlite:///{tmp_path}/jobs.db"
    s = open_store(u)
    # array 400 (--array=1,2,10): tasks 1 and 2 split off as raw ids 401 and 402; task 10 started last
    # and kept the array's id 400 (Slurm's array record); plain jobs 399 and 405 around it
    for raw, task in (("400", "10"), ("401", "1"), ("402", "2")):
        s.put(finished(node_record(job_id=raw, array_job_id="400", array_task_id=task, start=T0 + 10, end=T0 + 70)))
    s.put(finished(node_record(job_id="399", start=T0, end=T0 + 3600)))
    # job 405 requeued once: two attempts of one job
    s.put(finished(node_record(job_id="405", start=T0 + 100, end=T0 + 700, restart_count=0)))
    s.put(finished(node_record(job_id="405", start=T0 + 800, end=T0 + 1400, restart_count=1)))
    s.close()
    return u


def test_array_tasks_in_saccts_order(url, capsys):
    # sacct (src/sacct/sacct.c _sort_desc_submit_time): submit time, array job id, task id, job id
    rc, out, err = run_jobenergy(capsys, "--store", url, "-P", "-n", "-o", "JobID,JobIDRaw", "399,400,405")
    assert rc == 0, err
    assert out.split() == ["399|399", "400_1|401", "400_2|402", "400_10|400", "405|405", "405#0|405", "405#1|405"]


def test_default_table_fits_like_saccts(url, capsys):
    rc, out, err = run_jobenergy(capsys, "--store", url, "399,400,405")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["JobID", "User", "Elapsed", "CPU_kWh", "GPU_kWh", "RAM_kWh", "kgCO2e", "State", "Status"]
    # JobID 6 (400_10) + User 5 + Elapsed 8 + 3 x 7 (the kWh headers) + kgCO2e 6 + State 7 (UNKNOWN)
    # + Status 19 (complete(estimated)) + 8 separators = 80 (was 14 columns, ~165 wide on a cluster)
    assert max(len(line) for line in lines) == 80


def test_rollup_counts_jobs_and_attempts_apart(url, capsys):
    assert se_main(["rollup", "--month", "2024-02", "--by", "user", "-P", "--store", url]) == 0
    head, row = capsys.readouterr().out.strip().splitlines()
    cells = dict(zip(head.split("|"), row.split("|")))
    # 399, the array's 3 tasks (3 jobs: 400_1, 400_2, 400_10) and 405: 5 jobs in 6 attempts
    assert (cells["Jobs"], cells["Attempts"], cells["Unmeasured"]) == ("5", "6", "0")


@pytest.mark.parametrize("seconds,millis,text", [
    (59.6, False, "00:00:59"),        # Elapsed: whole seconds, the fraction dropped (secs2time_str)
    (3599.999, False, "00:59:59"),
    (93784.9, False, "1-02:03:04"),
    (59.9996, True, "00:59.999"),     # TotalCPU: usecs / 1000 truncated (_elapsed_time)
    (0.0015, True, "00:00.001"),
    (62.345, True, "01:02.345"),
    (3600.9, True, "01:00:00"),       # an hour or more: no fraction
    (90061.5, True, "1-01:01:01"),
])
def test_durations_as_sacct_prints_them(seconds, millis, text):
    assert format_duration(seconds, millis=millis) == text


def test_predict_without_gpu_says_what_to_give(capsys):
    base = ["predict", "--no-calibration", "--no-node-overhead", "--flops", "1e18"]
    assert se_main(base) != 0
    err = capsys.readouterr().err
    assert ("no GPU given (--gpu): the prediction needs the GPU's rated FLOP/s and power; give --gpu with its "
            "model (e.g. --gpu A100") in err and "or --gpu-flops and --gpu-watts" in err
    assert se_main([*base, "--gpu-flops", "3e14"]) != 0
    assert "needs the GPU's rated power;" in capsys.readouterr().err
