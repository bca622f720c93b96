"""The running StoreSink (interim flushes) keeps one store open per URL; a failed put drops it."""

import pytest

from slurm_energy.model import Status
from slurm_energy.outputs import store as store_sink
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import node_record


def test_running_flushes_reuse_one_open_store_and_a_failed_put_drops_it(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path}/jobs.db"
    monkeypatch.setattr(store_sink, "_KEPT", {})
    sink = store_sink.StoreSink(url, keep_open=True)
    sink.publish(node_record(job_id="71", work_dir="", status=Status.RUNNING))
    kept = store_sink._KEPT[url]
    sink.publish(node_record(job_id="71", work_dir="", status=Status.RUNNING))
    assert store_sink._KEPT[url] is kept  # the second flush reused the open store
    st = open_store(url, readonly=True)
    try:
        (r,) = st.get_job("71")  # the two interim flushes of one job: one row
    finally:
        st.close()
    assert r.status == Status.RUNNING

    def boom(*_a, **_k):
        raise RuntimeError("disk full (test)")

    monkeypatch.setattr(kept, "put", boom)
    with pytest.raises(RuntimeError):
        sink.publish(node_record(job_id="71", work_dir="", status=Status.RUNNING))
    assert url not in store_sink._KEPT  # the next flush opens the store again
    sink.publish(node_record(job_id="72", work_dir="", status=Status.RUNNING))
    assert store_sink._KEPT[url] is not kept
    store_sink._KEPT.pop(url).close()
