"""Multi-node merge: each node's Epilog writes one JobRecord (one NodeSummary); they are unioned here.

Layout of the results directory (root-only, mode 0700 at every level we create)::

    <results_dir>/<cluster>/<job_id>.<restart_count>/<node>.json     one node's JobRecord
    <results_dir>/<cluster>/<job_id>.<restart_count>/.lock           fcntl lock for try_merge

``restart_count`` (SLURM_JOB_RESTART_COUNT) separates the attempts of a requeued job, which share a
job id but are separate records (key cluster, job_id, start_time).

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
from typing import Iterable

from slurm_energy.model import JobRecord, NodeSummary, Status
from slurm_energy.natsort import natural_key, sort_devices

_SAFE = re.compile(r"^[A-Za-z0-9_.+\-]+$")

#: Status precedence when the same node reported twice (an interim flush and the Epilog's record).
_NODE_STATUS_RANK = {Status.RUNNING: 0, Status.PARTIAL: 1, Status.FAILED: 1, Status.COMPLETE: 2}


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
        ``partial`` if an expected node has not reported or a node is partial/failed, ``running`` if
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

    if missing or any(ns.status in (Status.PARTIAL, Status.FAILED) for ns in nodes):
        status = Status.PARTIAL
    elif any(ns.status == Status.RUNNING for ns in nodes):
        status = Status.RUNNING
    else:
        status = Status.COMPLETE
    if nodes and all(ns.status == Status.FAILED for ns in nodes):
        status = Status.FAILED

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


def read_node_records(job_dir) -> list[JobRecord]:
    """All node records (``*.json``, not temp files) in one attempt's directory, sorted by name.

    Raises ValueError naming the file if one does not parse as a JobRecord.
    """
    out = []
    for p in sorted(Path(job_dir).glob("*.json")):
        if p.name.startswith("."):
            continue
        try:
            out.append(JobRecord.model_validate_json(p.read_text()))
        except ValueError as e:
            raise ValueError(f"{p}: not a valid JobRecord ({e.__class__.__name__}: {str(e)[:200]})") from e
    return out


def try_merge(results_dir, cluster: str, job_id: str, restart_count: int, expected_nodes: list[str]):
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
        records = read_node_records(job_dir)
        reported = {ns.node for r in records for ns in r.nodes}
        if not set(expected_nodes) <= reported:
            return None
        for r in records:
            r.expected_nodes = _union([r.expected_nodes, list(expected_nodes)])
        return merge_records(records)
    finally:
        os.close(fd)  # closing releases the flock
