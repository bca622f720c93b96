"""The node's summary while the job runs, kept up to date at the cost of the rows added since the
previous update (the sampler's interim flush, every ``sampling.interim_s``): a week-long job costs
no more per update than an hour-long one.

:class:`RunningSummary` reads only the sample file's new lines
(:class:`~slurm_energy.sampling.samplefile.SampleReader`), sums each device over the new intervals
-- from the last row it had to the newest -- with the functions
:func:`~slurm_energy.accounting.summary.summarise_node` uses (``device_aggs``, the job's CPU-time
column carried over in a :class:`~slurm_energy.accounting.node_series.CpuState`), and adds the sums
to what it had (:meth:`DeviceAgg.merge`, :class:`UsageAgg`). The Epilog's summary is computed afresh from the whole file; the
running one differs from it only where the final view knows more:

* a stretch where the job's CPU time was not seen (the sampler not looking, or the job not seen in
  its first :data:`MAX_PENDING_ROWS` rows) is unmeasured here (share unknown), where the final
  summary may charge it (0 CPU-s before the job started; the job's true CPU time after the
  sampler's last look);
* a counter found inconsistent with its power readings switches to power integration from the
  update where it is found (the final summary switches the whole job);
* the running record has no power trace and no phase windows (the report is made at the end);
* sums are added update by update (float rounding differs in the last digits).

Rows that arrive out of time order (another writer's late row) make the next update start again
from the file's beginning, once.
"""

from __future__ import annotations

from typing import Any

from slurm_energy.accounting.device_agg import DeviceAgg, UsageAgg
from slurm_energy.accounting.idle_gpu import DEFAULT_RULE, IdleRule
from slurm_energy.accounting.node_series import CpuState, table_columns
from slurm_energy.accounting.summary import Traces, device_aggs, device_key_of, effective_policy
from slurm_energy.core import DeviceStatic, Status
from slurm_energy.model import NodeSummary
from slurm_energy.sampling.samplefile import SampleReader
from slurm_energy.sampling.sampletable import SampleTable

#: Rows kept unsummed while the job has not been seen (it is normally seen at the first sample):
#: past this, they are summed with the job's share unknown.
MAX_PENDING_ROWS = 60


class RunningSummary:
    """Incremental node summary of a growing sample file (see the module docstring)."""

    def __init__(self, path: str):
        self.path = path
        self._reset()

    def _reset(self) -> None:
        self._reader = SampleReader(self.path)
        self._last: SampleTable | None = None  # the last row summed: the next interval starts there
        self._last_cpu: float | None = None  # the job's CPU time at that row (as summed)
        self._cpu = CpuState()  # the job's CPU-time column carried over from the previous update
        self.aggs: dict[str, DeviceAgg] = {}
        self.hourly: dict[str, float] = {}
        self.pids: set[int] = set()
        self.n_rows = 0
        self.first_t: float | None = None
        self.ncpu: int | None = None
        self.mem_total: int | None = None
        self.usage = UsageAgg()
        self._pending = False  # _last holds every row so far: the job not seen yet

    def update(self, *, statics: list[DeviceStatic], cpus_alloc: int | None, policy: str = "shared",
               gpu_idle: IdleRule = DEFAULT_RULE) -> None:
        """Read the rows added to the file and add their intervals. Raises ValueError for an
        unknown policy (as :func:`summarise_node`)."""
        new = self._reader.read_table()
        if not len(new):
            return
        if not new.is_sorted() or (self._last is not None and new.t[0] <= self._last.t[-1]):
            self._reset()  # a row out of time order: once from the start, sorted
            new = self._reader.read_table().sorted()
        chunk = SampleTable()
        if self._last is not None:
            chunk.extend(self._last)
        start = len(chunk)
        chunk.extend(new)
        self._node_facts(new)
        pol, _ = effective_policy(policy, [self.ncpu], cpus_alloc)
        if self._pending:  # the chunk holds every row since the first: from the start again
            self._cpu, carried = CpuState(), []
        else:
            carried = [self._last_cpu] * start
        cols = table_columns(chunk, cpus_alloc, self._cpu, carried)
        if not self._cpu.seen and len(chunk) < MAX_PENDING_ROWS:
            self._last, self._last_cpu = chunk, None  # not seen yet: summed once it is (0 CPU-s before)
            self._pending = True
            return
        self._pending = False
        self.pids |= cols.job_pids
        cols.job_pids = self.pids
        traces = Traces.of(chunk.t)
        for dc, agg in device_aggs(chunk, cols, {s.device_id: s for s in statics}, pol, traces, gpu_idle):
            have = self.aggs.get(dc.device_id)
            if have is None:
                self.aggs[dc.device_id] = agg
            else:
                have.merge(agg)
        for h, e in traces.hourly.items():
            self.hourly[h] = self.hourly.get(h, 0.0) + e
        self.usage.add_cpu(cols.job_cpu[start:])
        self._last, self._last_cpu = chunk.last_rows(1), cols.job_cpu[-1]

    def _node_facts(self, new: SampleTable) -> None:
        self.n_rows += len(new)
        self.first_t = new.t[0] if self.first_t is None else self.first_t
        self.ncpu = self.ncpu or next((n for n in new.node["ncpu"] if n), None)
        self.mem_total = next((m for m in reversed(new.node["mem_total_bytes"]) if m), self.mem_total)
        self.usage.add_rows(new)

    def summary(self, *, job_id: str, node: str, start_time: float, end_time: float,
                statics: list[DeviceStatic], cpus_alloc: int | None, policy: str = "shared",
                interval_s: float = 5.0, status: Status = Status.RUNNING, errors: list[str] | None = None,
                span_known: bool = True, gpu_idle: IdleRule = DEFAULT_RULE, **_: Any) -> NodeSummary:
        """The node's :class:`NodeSummary` of the rows summed so far (by :meth:`update`, which the
        caller runs first: the sampler's interim flush reads the new rows once); ``start_time`` /
        ``end_time``: the job's span on the node so far, epoch s. Other keywords of
        :func:`~slurm_energy.accounting.summary.summarise_node` (marks, the CPU tail) do not apply."""
        pol, node_flags = effective_policy(policy, [self.ncpu], cpus_alloc)
        by_id = {s.device_id: s for s in statics}
        elapsed = max(0.0, end_time - start_time)
        devices = [a.energy(by_id.get(a.device_id), policy=pol, elapsed=elapsed, span_known=span_known,
                            node=node, node_flags=node_flags, usage_source=self.usage.source)
                   for a in sorted(self.aggs.values(), key=lambda a: device_key_of(a.device_class, a.device_id, by_id))]
        return NodeSummary(
            node=node, job_id=job_id, start_time=start_time, end_time=end_time, **self.usage.fields(),
            n_samples=self.n_rows, interval_s=interval_s, devices=devices, hourly_energy_j=dict(self.hourly),
            status=status, errors=list(errors or []))
