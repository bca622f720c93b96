"""Outputs: where a finished :class:`~slurm_energy.model.JobRecord` goes, behind one interface.

Every output is a :class:`~slurm_energy.outputs.base.Sink` (``name``, ``keeps_errors``,
``publish(record) -> notes``); :func:`slurm_energy.pipeline.publish` hands a record to a list of
them. Outputs never compute energy: they store, render or forward what accounting produced.

* :class:`~slurm_energy.outputs.store.StoreSink` -- the job store (SQLite/PostgreSQL).
* :class:`~slurm_energy.outputs.report.ReportSink` -- ``energy-<jobid>.html/.csv`` written as the
  job's user into its work dir.
* :class:`~slurm_energy.outputs.prometheus.PrometheusTextfile` -- node_exporter textfile (running
  jobs' energy so far, finished jobs for a while).
* :class:`~slurm_energy.outputs.slurm_writeback.SlurmWriteback` -- AdminComment, TRES energy.
"""
