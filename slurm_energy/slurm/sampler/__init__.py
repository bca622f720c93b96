"""The detached sampler: one per job (:mod:`.main`) or one per node (:mod:`.node`), the job's usage
probe (:mod:`.probe`: its cgroup, :mod:`.cgroup`, else its PIDs)."""
