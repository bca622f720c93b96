"""Requested vs used memory (item 7) and Slurm's own ConsumedEnergy beside ours (item 8)."""

from slurm_energy.cli.jobenergy import main
from slurm_energy.reporting.report import render_html
from slurm_energy.slurm.clients.scontrol import parse_show_job
from slurm_energy.slurm.context import JobContext, job_env_facts
from slurm_energy.slurm.jobend.jobfacts import requested_memory as _requested_memory
from tests.helpers.jobrecord_factory import finished, node_record, own_site_config, parse_slurm_env, store_with

MB, GB = 1024 ** 2, 1024 ** 3
T0 = 1_700_000_000.0
LINE = ("JobId=77 JobName=train UserId=alice(1001) GroupId=alice(1001) JobState=COMPLETED Restarts=0 "
        "NumNodes=2 NumCPUs=8 TRES=cpu=8,mem=16000M,node=2,billing=8 MinCPUsNode=4 MinMemoryNode=8000M "
        "MinTmpDiskNode=0 Features=(null)")


def _ctx(**kw):
    return JobContext(job_id="77", uid=1001, gid=1001, **kw)


NODE_TOTAL = 64 * GB  # the node's MemTotal, bytes (from its sample rows)


def test_request_per_node_from_slurmctld():
    facts = parse_show_job(LINE)
    assert (facts["min_memory_node"], facts["tres_mem"], facts["num_nodes"]) == ("8000M", "16000M", "2")
    b, how = _requested_memory(_ctx(), facts, 4, NODE_TOTAL, [])
    assert b == 8000 * MB and "scontrol" in how  # 8000 MiB = 8388608000 bytes


def test_request_per_cpu_from_slurmds_environment_times_cpus_on_node():
    # slurmd's Prolog environment carries SLURM_MEM_PER_CPU=1500 (MB); 4 CPUs here -> 6000 MiB. The
    # job's own processes may say anything: never read (issue 22)
    assert job_env_facts({"SLURM_JOB_ID": "77", "SLURM_MEM_PER_CPU": "1"}, "77") == {}
    b, how = _requested_memory(_ctx(mem_per_cpu="1500"), parse_show_job(LINE), 4, NODE_TOTAL, [])
    assert b == 6000 * MB and "x 4 CPUs" in how


def test_request_zero_is_the_whole_node_and_bad_text_is_an_error_not_a_crash():
    assert _requested_memory(_ctx(mem_per_node="0"), None, 4, NODE_TOTAL, [])[0] == 64 * GB
    errors: list = []
    assert _requested_memory(_ctx(mem_per_node="lots"), None, 4, NODE_TOTAL, errors) == (None, "")
    assert "mem_per_node='lots'" in errors[0]
    assert parse_slurm_env({"SLURM_JOB_ID": "1", "SLURM_JOB_UID": "0", "SLURM_JOB_GID": "0",
                            "SLURM_MEM_PER_NODE": "4096"}).mem_per_node == "4096"


def _store(tmp_path, monkeypatch, **kw):
    own_site_config(tmp_path, monkeypatch)
    r = node_record(job_id="77", start=T0, end=T0 + 60, **kw)
    r.nodes[0].req_mem_bytes = 4000 * MB
    r.nodes[0].req_mem_source = "per node 4000M (scontrol show job)"
    r.nodes[0].max_mem_bytes = int(1.5 * GB)
    return store_with(tmp_path, finished(r), name="j.db"), finished(r)


def test_jobenergy_reqmem_maxrss_slurmenergy(tmp_path, monkeypatch, capsys):
    u, _ = _store(tmp_path, monkeypatch, slurm_energy_j=12340.0, slurm_energy_source="Slurm's ConsumedEnergyRaw")
    assert main(["--store", u, "-P", "-n", "-o", "JobID,ReqMem,MaxRSS,SlurmEnergy,SlurmEnergyRaw", "77"]) == 0
    assert capsys.readouterr().out.strip() == "77|4000M|1.50G|12.34K|12340"  # 1.5 GiB: sacct prints 1.50G
    assert main(["--store", u, "-P", "-n", "-l", "77"]) == 0
    row = capsys.readouterr().out.splitlines()[0].split("|")
    assert row[13:15] == ["4000M", "1.50G"]  # 1536 MB as sacct prints it (convert_num_unit, exact)


def test_slurm_energy_unavailable_is_na_never_0(tmp_path, monkeypatch, capsys):
    u, _ = _store(tmp_path, monkeypatch, slurm_energy_source="unavailable: Slurm collects no energy")
    assert main(["--store", u, "-P", "-n", "-o", "JobID,SlurmEnergy", "77"]) == 0
    assert capsys.readouterr().out.strip() == "77|n/a"


def test_report_shows_requested_vs_used(tmp_path, monkeypatch):
    _, rec = _store(tmp_path, monkeypatch, slurm_energy_j=12340.0, slurm_energy_source="Slurm's ConsumedEnergyRaw")
    html = render_html(rec)
    # 4000 MiB = 3.91 GiB requested, 1.50 GiB used: 1.5 / 3.90625 = 38 %
    assert "requested 3.91 GiB · used (peak) 1.50 GiB · 38 % of the request" in html
    assert "12.3 kJ" not in html and "3.43 Wh" in html  # 12340 J = 3.43 Wh, Slurm's, labelled


def test_request_from_tres_when_no_min_memory_and_zero_is_slurms_allocation():
    # no MinMemoryNode/CPU printed: TRES mem=16000M over NumNodes=2 -> 8000 MiB per node
    facts = {"tres_mem": "16000M", "num_nodes": "2"}
    b, how = _requested_memory(_ctx(), facts, 4, NODE_TOTAL, [])
    assert b == 8000 * MB and "TRES mem=16000M" in how
    # --mem=0 (MinMemoryNode=0): the whole node as Slurm allocated it, TRES 32G / 1 node = 32 GiB
    b, _ = _requested_memory(_ctx(), {"min_memory_node": "0", "tres_mem": "32G", "num_nodes": "1"}, 4, NODE_TOTAL, [])
    assert b == 32 * GB
