"""Non-UTF-8 text a user controls is stored shown as \\xNN, its bytes kept (issue 22)."""

from slurm_energy.accounting.merge import merge_records
from slurm_energy.core import one_line, shown_text
from slurm_energy.model import JobRecord, text_safe
from tests.helpers.jobrecord_factory import node_record


def test_a_record_with_undecodable_bytes_is_storable_and_its_bytes_come_back():
    r = node_record(job_name="run\udcff", work_dir="/w/\udce9", errors=["cannot open /w/\udce9"])
    assert text_safe(r) is r  # changed in place
    again = JobRecord.model_validate_json(r.model_dump_json())
    assert (again.job_name, again.work_dir, again.errors) == ("run\\xff", "/w/\\xe9", ["cannot open /w/\\xe9"])
    assert again.raw("work_dir").encode("utf-8", "surrogateescape") == b"/w/\xe9"
    assert again.raw_text == {"job_name": "72756eff", "work_dir": "2f772fe9", "text:cannot open /w/\\xe9":
                              b"cannot open /w/\xe9".hex()}
    assert again.raw("user") == "alice"  # a UTF-8 field: itself


def test_text_safe_costs_nothing_on_utf8_and_merging_keeps_every_nodes_bytes():
    a = node_record(node="n1", expected=("n1", "n2"))
    b = node_record(node="n2", expected=("n1", "n2"), errors=["n2: bad \udcfe"])
    assert text_safe(a).raw_text == {}
    text_safe(b)
    m = merge_records([a, b])
    assert m.raw_text == {"text:n2: bad \\xfe": b"n2: bad \xfe".hex()}


def test_shown_text_and_log_lines():
    assert shown_text("caf\udce9") == "caf\\xe9" and shown_text("café") == "café"
    assert one_line("a\nb\r\x1b[31m\udcff") == "a\\nb\\r\\x1b[31m\\xff"
