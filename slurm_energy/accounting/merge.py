"""Multi-node merge: each node's Epilog writes one JobRecord (one NodeSummary); they are unioned here.

Layout of the results directory (root-only, mode 0700 at every level we create)::

    <results_dir>/<cluster>/<job_id>.<restart_count>/<node>.json     one node's JobRecord
    <results_dir>/<cluster>/<job_id>.<restart_count>/.lock           fcntl lock for try_merge

``restart_count`` (SLURM_JOB_RESTART_COUNT) separates the attempts of a requeued job, which share a
job id but are separate records (key cluster, job_id, start_time). A job id Slurm *reused* (state
reset, MaxJobId wrap) may find an older run's node records in the same directory: records are
grouped into runs (:func:`split_runs`: SLUID or Slurm's start time where Slurm gives them, else the
run's node list and overlapping time spans) and only one run is ever merged; once stored, its files
are moved to ``stored/<start>/`` (:func:`retire_run`).

Energy is kept per (node, device): the merged record's ``nodes`` is the union of the node summaries,
keyed by node name. Nothing is multiplied by a node or task count and no totals are computed here;
:func:`slurm_energy.accounting.formulas.finalise_record` sums the devices once and applies PUE and
carbon intensity.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from pathlib import Path
from typing import Iterable, Optional

from slurm_energy.model import JobRecord, NodeSummary, Status
from slurm_energy.natsort import natural_key, sort_devices

_SAFE = re.compile(r"^[A-Za-z0-9_.+\-]+$")

#: Status precedence when the same node reported twice (an interim flush and the Epilog's record).
_NODE_STATUS_RANK = {Status.RUNNING: 0, Status.NO_DATA: 1, Status.PARTIAL: 1, Status.FAILED: 1, Status.COMPLETE: 2}


def _component(name: str, value: str) -> str:
    """Check one path component (cluster, job id, node name) cannot escape the results dir."""
    value = str(value)
    if not value or value in (".", "..") or not _SAFE.match(value):
        raise ValueError(
            f"{name}={value!r} cannot be used in a results path: use letters, digits and _ . + - only "
            "(a Slurm cluster, job id or node name never contains '/')"
        )
    return value


def job_results_dir(results_dir, cluster: str, job_id: str, restart_count: int) -> Path:
    """Directory holding one attempt's node records: ``<results_dir>/<cluster>/<job_id>.<restart_count>``.

    Raises ValueError if a component contains a path separator or other unsafe character, or if
    ``restart_count`` is negative.
    """
    if int(restart_count) < 0:
        raise ValueError(f"restart_count={restart_count!r} must be >= 0 (SLURM_JOB_RESTART_COUNT)")
    return (
        Path(results_dir)
        / _component("cluster", cluster or "default")
        / f"{_component('job_id', job_id)}.{int(restart_count)}"
    )


def node_record_path(results_dir, cluster: str, job_id: str, restart_count: int, node: str) -> Path:
    """Path of one node's record: ``<results_dir>/<cluster>/<job_id>.<restart_count>/<node>.json``.

    An empty cluster name maps to ``default``. Raises ValueError for unsafe components (see
    :func:`job_results_dir`).
    """
    return job_results_dir(results_dir, cluster, job_id, restart_count) / f"{_component('node', node)}.json"


def _makedirs_private(path: Path) -> None:
    """Create ``path`` and missing parents with mode 0700 (records name users and jobs)."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            pass
        os.chmod(d, 0o700)  # mkdir honours umask; make the mode exact


def write_node_record(results_dir, record: JobRecord) -> Path:
    """Write one node's record atomically (temp file in the same directory, fsync, rename).

    Args:
        results_dir: root of the results tree (str or Path).
        record: a JobRecord with exactly one NodeSummary (the node whose Epilog runs).

    Returns:
        The final path (see :func:`node_record_path`). The file is mode 0600, directories 0700.

    Raises:
        ValueError: the record does not hold exactly one node, or a path component is unsafe.
        OSError: the directory cannot be created or written.
    """
    if len(record.nodes) != 1:
        raise ValueError(
            f"write_node_record: record for job {record.job_id!r} has {len(record.nodes)} nodes; "
            "a node's Epilog writes exactly one NodeSummary (merge_records unions them)"
        )
    node = record.nodes[0].node
    path = node_record_path(results_dir, record.cluster, record.job_id, record.restart_count, node)
    _makedirs_private(path.parent)
    _keep_other_runs_file(path, record)
    fd, tmp = tempfile.mkstemp(prefix=f".{node}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(record.model_dump_json())
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


#: Node records of one run overlap in time: every node's Prolog runs before the job ends and every
#: Epilog after it. Clock skew between nodes allowed for, s.
RUN_OVERLAP_SLACK_S = 2.0


def run_identity(r: JobRecord) -> tuple:
    """What Slurm says about which run a node record belongs to: (restart_count, SLUID or Slurm's
    start time when given, the run's node list). Records with different identities are different
    runs; equal identities without SLUID/start time (Slurm 22.05) are split by time overlap."""
    explicit = ("sluid", r.sluid) if r.sluid else (("start", float(r.slurm_start_time)) if r.slurm_start_time else None)
    return (r.restart_count, explicit, tuple(sorted(r.expected_nodes, key=natural_key)))


def _span(r: JobRecord) -> tuple[float, float]:
    starts = [r.start_time] + [ns.start_time for ns in r.nodes]
    ends = [r.end_time] + [ns.end_time for ns in r.nodes]
    return min(starts), max(ends)


def same_run(a: JobRecord, b: JobRecord) -> bool:
    """True if two node records of one (cluster, job id) belong to one run of the job: same
    :func:`run_identity` and, without a SLUID or Slurm start time, overlapping spans."""
    if (a.cluster, a.job_id) != (b.cluster, b.job_id) or run_identity(a) != run_identity(b):
        return False
    if run_identity(a)[1] is not None:
        return True
    (s0, e0), (s1, e1) = _span(a), _span(b)
    return s1 <= e0 + RUN_OVERLAP_SLACK_S and s0 <= e1 + RUN_OVERLAP_SLACK_S


def split_runs(records: list[JobRecord]) -> list[list[JobRecord]]:
    """Group node records into runs of the job (:func:`same_run`), oldest run first.

    A job id Slurm reused (state reset, MaxJobId wrap) on the same or another set of nodes, and a
    requeued attempt, are different runs: their node records are never merged into one job.
    """
    runs: list[list[JobRecord]] = []
    for r in sorted(records, key=lambda r: _span(r)[0]):
        for run in runs:
            if any(same_run(r, x) for x in run):
                run.append(r)
                break
        else:
            runs.append([r])
    return runs


def _keep_other_runs_file(path: Path, record: JobRecord) -> None:
    """An older run's record at ``path`` (same node, same job id: a reused id whose earlier run never
    completed its merge) is renamed ``<node>.<start>.json`` instead of being overwritten."""
    try:
        old = JobRecord.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return
    if not same_run(old, record):
        os.replace(path, path.with_name(f"{path.stem}.{int(_span(old)[0])}.json"))


def _better_node(a: NodeSummary, b: NodeSummary) -> NodeSummary:
    """Of two summaries of the same node, keep the final one (Epilog over interim), then the longer."""
    ka = (_NODE_STATUS_RANK.get(a.status, 0), a.end_time, a.n_samples)
    kb = (_NODE_STATUS_RANK.get(b.status, 0), b.end_time, b.n_samples)
    return b if kb > ka else a


def _union(lists: Iterable[list[str]]) -> list[str]:
    seen, out = set(), []
    for lst in lists:
        for x in lst:
            if x not in seen:
                seen.add(x)
                out.append(x)
    return out


def merge_records(records: list[JobRecord]) -> JobRecord:
    """Union per-node records of one job attempt into one record. Pure; does not compute totals.

    Args:
        records: JobRecords of the same (cluster, job_id, restart_count), each normally holding one
            NodeSummary. The same node may appear more than once (a retried Epilog, an interim
            flush): it counts once -- the final summary wins over an interim one, then the later
            ``end_time``.

    Returns:
        A new JobRecord: Slurm facts from the records (first non-empty value, records taken in node
        order), ``nodes`` in numeric name order (n2 before n10, as Slurm's hostlist), ``start_time`` = min, ``end_time`` = max,
        ``expected_nodes`` = union, ``errors`` = union (plus one per missing node), ``tags`` = union
        (the first node's value wins per key). ``status``:
        ``no_data`` if every node that reported measured nothing, else ``partial`` if an expected
        node has not reported or a node is partial/failed/no_data, ``running`` if
        any node summary is an interim one, else ``complete``. Totals (``energy_it_j``, ``it_kwh``,
        ...) are left empty for ``finalise_record``.

    Raises:
        ValueError: empty list, or records of different jobs/attempts (names the differing field).
    """
    if not records:
        raise ValueError("merge_records: no records given; pass at least one node's JobRecord")
    first = records[0]
    for r in records[1:]:
        for f in ("cluster", "job_id", "restart_count"):
            if getattr(r, f) != getattr(first, f):
                raise ValueError(
                    f"merge_records: {f} differs ({getattr(first, f)!r} vs {getattr(r, f)!r}); "
                    "merge only the node records of one job attempt"
                )
    by_node: dict[str, NodeSummary] = {}
    for r in records:
        for ns in r.nodes:
            by_node[ns.node] = _better_node(by_node[ns.node], ns) if ns.node in by_node else ns
    nodes = [by_node[k].model_copy(deep=True) for k in sorted(by_node, key=natural_key)]
    for ns in nodes:
        ns.devices = sort_devices(ns.devices)

    ordered = sorted(records, key=lambda r: (0, natural_key(r.nodes[0].node)) if r.nodes else (1, natural_key("")))
    base = ordered[0].model_copy(deep=True)
    for field in ("array_job_id", "array_task_id", "het_job_id", "het_job_offset", "uid", "gid"):
        if getattr(base, field) is None:
            setattr(base, field, next((getattr(r, field) for r in ordered if getattr(r, field) is not None), None))
    for field in ("job_name", "user", "account", "partition", "work_dir", "exit_code"):
        if not getattr(base, field):
            setattr(base, field, next((getattr(r, field) for r in ordered if getattr(r, field)), ""))

    expected = _union(r.expected_nodes for r in records)
    missing = [n for n in expected if n not in by_node]
    errors = _union([r.errors for r in records] + [ns.errors for ns in nodes])
    errors = _union([errors, [f"node {n} never reported" for n in missing]])

    if missing or any(ns.status in (Status.PARTIAL, Status.FAILED, Status.NO_DATA) for ns in nodes):
        status = Status.PARTIAL
    elif any(ns.status == Status.RUNNING for ns in nodes):
        status = Status.RUNNING
    else:
        status = Status.COMPLETE
    if nodes and all(ns.status == Status.FAILED for ns in nodes):
        status = Status.FAILED
    if nodes and all(ns.status == Status.NO_DATA for ns in nodes):
        status = Status.NO_DATA  # the job ran, nothing was measured on any node that reported

    tags: dict = {}
    for r in ordered:  # what the script declared (issue 13): first node's value wins per key
        for k, v in (r.tags or {}).items():
            tags.setdefault(k, v)

    starts = [r.start_time for r in records] + [ns.start_time for ns in nodes]
    ends = [r.end_time for r in records] + [ns.end_time for ns in nodes]
    return base.model_copy(
        update=dict(
            nodes=nodes,
            expected_nodes=expected,
            start_time=min(starts),
            end_time=max(ends),
            errors=errors,
            status=status,
            tags=tags,
            energy_it_j={},
            device_energy_j={},
            methods={},
            it_kwh=None,
            facility_kwh=None,
            co2e_kg=None,
            coverage_complete=not missing,
        )
    )


def read_node_files(job_dir) -> list[tuple[Path, JobRecord]]:
    """(path, record) of every node record (``*.json``, not temp files) in one attempt's directory,
    in numeric name order. Records already stored (moved to ``stored/``) are not read.

    Raises ValueError naming the file if one does not parse as a JobRecord.
    """
    out = []
    for p in sorted(Path(job_dir).glob("*.json"), key=lambda p: natural_key(p.name)):
        if p.name.startswith("."):
            continue
        try:
            out.append((p, JobRecord.model_validate_json(p.read_text())))
        except ValueError as e:
            raise ValueError(f"{p}: not a valid JobRecord ({e.__class__.__name__}: {str(e)[:200]})") from e
    return out


def read_node_records(job_dir) -> list[JobRecord]:
    """The records of :func:`read_node_files` (all runs: see :func:`split_runs`)."""
    return [r for _, r in read_node_files(job_dir)]


def retire_run(results_dir, merged: JobRecord) -> int:
    """Move the stored run's node files out of the results directory's way, into
    ``<job dir>/stored/<start_time>/``, so a later run of the same job id (Slurm reused it) never
    sees them. Under the directory's lock; files of other runs stay. Returns the number moved."""
    job_dir = job_results_dir(results_dir, merged.cluster, merged.job_id, merged.restart_count)
    if not job_dir.is_dir():
        return 0
    fd = os.open(job_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        dest = job_dir / "stored" / f"{merged.start_time:.3f}"
        moved = 0
        for p, r in read_node_files(job_dir):
            if same_run(r, merged) or (run_identity(r)[1] is None and _in_run(r, merged)):
                _makedirs_private(dest)
                os.replace(p, dest / p.name)
                moved += 1
        return moved
    finally:
        os.close(fd)


def _in_run(r: JobRecord, merged: JobRecord) -> bool:
    """A node record whose node and start are the merged run's (merge widens expected_nodes)."""
    return any(ns.node == m.node and abs(ns.start_time - m.start_time) < 1e-6
               for ns in r.nodes for m in merged.nodes)


def try_merge(results_dir, cluster: str, job_id: str, restart_count: int, expected_nodes: list[str],
              record: Optional[JobRecord] = None):
    """Merge the attempt's node records if every expected node has reported.

    Safe to run concurrently from several nodes' Epilogs: reading is done under an exclusive
    ``fcntl.flock`` on ``<job dir>/.lock``, and node records only appear by atomic rename, so no
    caller ever sees a half-written record. Idempotent: calling again returns an equal record. When
    two Epilogs both see the last record, both get the merged record; storing it is an upsert on
    (cluster, job_id, start_time), so a double ``Store.put`` is harmless.

    Args:
        results_dir: root of the results tree.
        cluster, job_id, restart_count: the attempt (see :func:`node_record_path`).
        expected_nodes: host names of the allocation (``expand_hostlist(SLURM_NODELIST)``).
        record: this node's record just written: only node records of its run
            (:func:`split_runs`) are merged. ``None``: the newest run in the directory.

    Returns:
        The merged :class:`JobRecord` (status from :func:`merge_records`), or ``None`` while some
        expected node has not written its record yet (or the directory does not exist).

    Raises:
        ValueError: ``expected_nodes`` is empty, or a node record does not parse.
    """
    if not expected_nodes:
        raise ValueError("try_merge: expected_nodes is empty; pass expand_hostlist(SLURM_NODELIST)")
    job_dir = job_results_dir(results_dir, cluster, job_id, restart_count)
    if not job_dir.is_dir():
        return None
    lock_path = job_dir / ".lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        runs = split_runs(read_node_records(job_dir))
        if not runs:
            return None
        mine = [run for run in runs if record is not None and any(same_run(record, x) for x in run)]
        records = mine[0] if mine else runs[-1]
        reported = {ns.node for r in records for ns in r.nodes}
        if not set(expected_nodes) <= reported:
            return None
        for r in records:
            r.expected_nodes = _union([r.expected_nodes, list(expected_nodes)])
        return merge_records(records)
    finally:
        os.close(fd)  # closing releases the flock
