"""Build small JobRecords for the merge/store/jobenergy tests (plain data, no hardware faked)."""

from __future__ import annotations

from slurm_energy.model import DeviceEnergy, JobRecord, Method, NodeSummary, Status


def device(cls: str, energy_j, method=Method.TDP_ESTIMATE, node="n1", coverage=1.0, device_id=None,
           **kw) -> DeviceEnergy:
    return DeviceEnergy(
        device_class=cls,
        device_id=device_id or f"{cls}-0",
        node=node,
        method=method,
        energy_j=energy_j,
        coverage=coverage if energy_j is not None else 0.0,
        **kw,
    )


def job_record(job_id="100", devices=(), node="n1", start=1000.0, end=4600.0, expected=("n1",),
               status=Status.COMPLETE, node_fields=None, **kw) -> JobRecord:
    """One node's record holding ``devices`` (any classes; see :func:`device`), user alice/physics
    on cluster c1 unless ``kw`` says otherwise; ``node_fields`` go to its NodeSummary (power_trace,
    cpu_time_s...)."""
    ns = NodeSummary(node=node, job_id=job_id, start_time=start, end_time=end, devices=list(devices), status=status,
                     **(node_fields or {}))
    fields = dict(
        cluster="c1",
        job_id=job_id,
        user="alice",
        uid=1001,
        account="physics",
        partition="batch",
        start_time=start,
        end_time=end,
        expected_nodes=list(expected),
        nodes=[ns],
        status=status,
    )
    fields.update(kw)
    return JobRecord(**fields)


def node_record(
    job_id="100",
    node="n1",
    start=1000.0,
    end=4600.0,
    cpu_j=3.6e6,
    ram_j=3.6e5,
    gpu_j=None,
    expected=("n1",),
    status=Status.COMPLETE,
    **kw,
) -> JobRecord:
    """One node's record as its Epilog writes it (one NodeSummary): cpu and ram by the TDP model
    (``None`` = unmeasured), a GPU by its counter when ``gpu_j`` is given."""
    devs = [device("cpu", cpu_j, node=node), device("ram", ram_j, node=node)]
    if gpu_j is not None:
        devs.append(device("gpu", gpu_j, method=Method.COUNTER, node=node))
    return job_record(job_id, devs, node=node, start=start, end=end, expected=expected, status=status, **kw)


def site_yaml(tmp, text: str = "", *, cluster: str = "t", paths: dict | None = None, spool: bool = True,
              monkeypatch=None):
    """The older, text form of the ``site_config`` fixture (tests/helpers/site_files.py), kept for
    tests/slurm/ until its files move to that fixture: ``tmp/site.yaml`` with ``cluster_name: <cluster>``
    (none for ""), a ``paths:`` section keeping the node's files under ``tmp`` (``spool_dir``
    tmp/spool, ``spool_fallback_dir`` tmp/spool2 -- not this machine's /run/slurm-energy, which a
    node finalizer's sweep drains -- and ``log_dir`` tmp/log unless ``spool`` is False, then ``paths``' entries, e.g.
    ``store_url``), then ``text`` (more YAML, without a ``paths:`` key). With ``monkeypatch``,
    $SLURM_ENERGY_CONFIG points at it (never this machine's /etc/slurm-energy/site.yaml) and
    $SLURM_ENERGY_STORE is unset. Returns the file's path."""
    entries = {**({"spool_dir": f"{tmp}/spool", "spool_fallback_dir": f"{tmp}/spool2", "log_dir": f"{tmp}/log"}
                  if spool else {}), **(paths or {})}
    site = tmp / "site.yaml"
    site.write_text((f"cluster_name: {cluster}\n" if cluster else "")
                    + ("paths:\n" + "".join(f"  {k}: {v}\n" for k, v in entries.items()) if entries else "") + text)
    if monkeypatch is not None:
        monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
        monkeypatch.delenv("SLURM_ENERGY_STORE", raising=False)
    return site


def own_site_config(tmp_path, monkeypatch, text: str = "cluster_name: c1\n"):
    """$SLURM_ENERGY_CONFIG at a site.yaml of exactly ``text`` (:func:`site_yaml`); returns its path."""
    return site_yaml(tmp_path, text, cluster="", spool=False, monkeypatch=monkeypatch)


def hook_env(job_id: str = "777", *, node: str = "n1", uid: int | None = None, gid: int | None = None,
             user: str = "u", context: str = "", **more: str) -> dict:
    """The environment slurmd gives a Prolog/Epilog (Slurm's prolog_epilog docs: SLURM_JOB_*,
    SLURMD_NODENAME, SLURM_SCRIPT_CONTEXT ``prolog_slurmd``/``epilog_slurmd``) for a one-node job
    of cluster ``t`` on one CPU, run by this process's user unless ``uid``/``gid`` are given;
    ``more``: further variables (SLURM_JOB_WORK_DIR=...)."""
    import os

    env = {"SLURM_JOB_ID": job_id, "SLURM_JOB_UID": str(os.getuid() if uid is None else uid),
           "SLURM_JOB_GID": str(os.getgid() if gid is None else gid), "SLURM_JOB_USER": user,
           "SLURMD_NODENAME": node, "SLURM_NODELIST": node, "SLURM_CLUSTER_NAME": "t", "SLURM_JOB_CPUS_PER_NODE": "1"}
    if os.environ.get("SLURM_ENERGY_MARKS_DIR"):  # the suite's marks root (conftest), not the host's
        env["SLURM_ENERGY_MARKS_DIR"] = os.environ["SLURM_ENERGY_MARKS_DIR"]
    return {**env, **({"SLURM_SCRIPT_CONTEXT": context} if context else {}), **more}


def store_with(tmp_path, *records: JobRecord, name: str = "jobs.db") -> str:
    """A SQLite store at ``tmp_path/name`` holding ``records`` (put in order); returns its URL."""
    from slurm_energy.store import open_store

    url = f"sqlite:///{tmp_path}/{name}"
    st = open_store(url)
    try:
        for r in records:
            st.put(r)
    finally:
        st.close()
    return url


def finished(record: JobRecord, pue=1.5, ci=400.0) -> JobRecord:
    """Fill totals the way finalise_record will (sum of device energies, x PUE, x CI); test-only.

    Kept here so the store/CLI tests do not depend on the lead's module; the arithmetic is the
    method's: it_kwh = sum J / 3.6e6, facility = it x PUE, kg = facility x CI / 1000.
    """
    per_class: dict = {}
    methods: dict = {}
    for ns in record.nodes:
        for d in ns.devices:
            if d.energy_j is None:
                per_class.setdefault(d.device_class, None)
            else:
                prev = per_class.get(d.device_class)
                per_class[d.device_class] = (prev or 0.0) + d.energy_j
            methods[d.device_class] = d.method
    measured = [v for v in per_class.values() if v is not None]
    it_kwh = sum(measured) / 3.6e6 if measured else None
    r = record.model_copy(deep=True)
    r.energy_it_j = per_class
    r.methods = methods
    r.it_kwh = it_kwh
    r.facility_kwh = None if it_kwh is None else it_kwh * pue
    r.co2e_kg = None if it_kwh is None else it_kwh * pue * ci / 1000.0
    r.co2e_gross_kg = r.co2e_kg  # alpha 1: location-based = net
    r.carbon.pue = pue
    r.carbon.ci_g_per_kwh = ci
    return r


def run_jobenergy(capsys, *argv: str) -> tuple[int, str, str]:
    """``jobenergy ARGV`` in this process: (exit status, stdout, stderr)."""
    from slurm_energy.cli.jobenergy import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def try_merge(results_dir, cluster, job_id, restart_count, expected_nodes, record=None) -> JobRecord | None:
    """What the finalizer does with the results directory: the run's merged record once every
    expected node has reported (collect_node_records), else None."""
    from slurm_energy.accounting.merge import merge_records
    from slurm_energy.slurm.jobend.results import collect_node_records

    records = collect_node_records(results_dir, cluster, job_id, restart_count, expected_nodes, record)
    return None if records is None else merge_records(records)


def parse_slurm_env(env):
    """The JobContext the hooks read from slurmd's environment ``env``."""
    from slurm_energy.slurm.context import JobContext, slurm_env_fields

    return JobContext(**slurm_env_fields(env))
