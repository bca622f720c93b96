import pytest

from slurm_energy.slurm.hostlist import expand_hostlist


def test_brief_example():
    # n[1-3,5] -> n1 n2 n3 n5 ; gpu01 as-is ; a[01-02]b keeps the 2-digit padding
    assert expand_hostlist("n[1-3,5],gpu01,a[01-02]b") == ["n1", "n2", "n3", "n5", "gpu01", "a01b", "a02b"]


def test_single_and_plain_lists():
    assert expand_hostlist("n1") == ["n1"]
    assert expand_hostlist("n1,n2") == ["n1", "n2"]
    assert expand_hostlist("  ") == []
    assert expand_hostlist("") == []


def test_padding_from_lower_bound():
    # [08-11] -> 08 09 10 11 (width 2 from "08")
    assert expand_hostlist("c[08-11]") == ["c08", "c09", "c10", "c11"]
    # [098-101]: width 3
    assert expand_hostlist("c[098-101]") == ["c098", "c099", "c100", "c101"]


def test_cartesian_product_of_groups():
    # 2 racks x 2 nodes = 4 names, left group varies slowest
    assert expand_hostlist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]


def test_duplicates_once():
    assert expand_hostlist("n[1-2],n2,n1") == ["n1", "n2"]


def test_large_range_count():
    # 1..1000 inclusive = 1000 hosts; last padded to width 4 from "0001"
    hosts = expand_hostlist("x[0001-1000]")
    assert len(hosts) == 1000
    assert hosts[-1] == "x1000" and hosts[0] == "x0001"


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("n[1-3", "without a matching ']'"),
        ("n1-3]", "without a matching '['"),
        ("n[3-1]", "runs backwards"),
        ("n[a-b]", "bad range 'a-b'"),
        ("n1,,n2", "empty host name"),
        ("n[[1]]", "nested"),
        ("n[1-99999999]", "more than"),
    ],
)
def test_bad_input_names_the_problem(bad, fragment):
    with pytest.raises(ValueError) as ei:
        expand_hostlist(bad)
    assert fragment in str(ei.value)
    assert repr(bad) in str(ei.value) or bad.strip() in str(ei.value)
