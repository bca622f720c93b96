"""Slurm's own formats (durations, K/M/G suffixes, memory requests, ConsumedEnergy): hand values
and hypothesis round trips."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_energy.reporting.scale import format_duration  # Slurm's [D-]HH:MM:SS, also the report's
from slurm_energy.slurm.clients.formats import (
    SlurmFormatError,
    format_energy,
    format_memory,
    parse_duration,
    parse_energy_j,
    parse_memory,
    parse_suffixed,
    requested_memory_bytes,
)

MB, GB = 1024 ** 2, 1024 ** 3


@pytest.mark.parametrize("text,seconds", [
    ("00:00:00", 0.0),
    ("00:01:05", 65.0),
    ("1-02:03:04", 86400 + 2 * 3600 + 3 * 60 + 4),  # 93784 s
    ("12-00:00:00", 12 * 86400),
    ("01:02.345", 62.345),          # sacct TotalCPU below an hour: MM:SS.mmm
    ("02:03:04.500", 7384.5),       # HH:MM:SS.mmm
    ("1-00:00:01.250", 86401.25),
    ("2-03", 2 * 86400 + 3 * 3600),  # time limit D-HH
    ("2-03:04", 2 * 86400 + 3 * 3600 + 4 * 60),  # D-HH:MM
    ("59:59", 3599.0),
])
def test_durations_hand_values(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "   ", "INVALID", "N/A", "(null)", None])
def test_unknown_duration_is_none_never_zero(text):
    assert parse_duration(text) is None


def test_unlimited_is_infinite():
    assert parse_duration("UNLIMITED") == math.inf and parse_duration("Partition_Limit") == math.inf
    assert format_duration(math.inf) == "UNLIMITED"


@pytest.mark.parametrize("text", ["abc", "1:2:3:4", "01:60:00", "1-25:00:00", "10", "-01:00:00", "1.5"])
def test_bad_durations_name_the_field(text):
    with pytest.raises(SlurmFormatError, match="TotalCPU"):
        parse_duration(text, "TotalCPU")


@given(st.integers(min_value=0, max_value=400 * 86400))
def test_elapsed_round_trip(sec):
    assert parse_duration(format_duration(sec)) == sec


@given(st.integers(min_value=0, max_value=3599_999))
def test_totalcpu_millis_round_trip(ms):
    text = format_duration(ms / 1000, millis=True)
    assert parse_duration(text) == pytest.approx(ms / 1000, abs=1e-9)


def test_format_duration_hand_values():
    assert format_duration(93784) == "1-02:03:04"
    assert format_duration(62.345, millis=True) == "01:02.345"
    assert format_duration(3600.2, millis=True) == "01:00:00"
    assert format_duration(None) == ""


@pytest.mark.parametrize("text,joules", [
    ("0", 0.0), ("123", 123.0), ("12.34K", 12340.0), ("1.50M", 1.5e6), ("2G", 2e9), ("3T", 3e12), ("0.5k", 500.0),
])
def test_energy_suffixes_are_powers_of_1000(text, joules):
    assert parse_energy_j(text) == pytest.approx(joules)


def test_energy_unknown_and_bad():
    assert parse_energy_j("") is None and parse_energy_j(None) is None
    with pytest.raises(SlurmFormatError, match="ConsumedEnergy"):
        parse_energy_j("12 kJ")


@given(st.integers(min_value=0, max_value=999 * 10 ** 15))
def test_energy_format_round_trip_within_sacct_rounding(j):
    # ConsumedEnergy is a whole number of J (uint64); sacct prints 2 decimals of the scaled value:
    # half a unit of the 2nd decimal at most
    text = format_energy(j)
    back = parse_energy_j(text)
    step = 1000 ** ("KMGTPE".index(text[-1]) + 1) if text[-1] in "KMGTPE" else 1
    assert abs(back - j) <= 0.005 * step + 1e-9


# sacct's number formatting, restated from Slurm's convert_num_unit2 (src/common/slurm_protocol_api.c,
# SchedMD/slurm 284c3b95f0) as src/sacct/print.c calls it: ConsumedEnergy divisor 1000 without
# CONVERT_NUM_UNIT_EXACT; MaxRSS (bytes) and ReqMem (MB) divisor 1024 with it (sacct's default
# convert_flags). An integer result prints "%u%c", otherwise "%.2f%c"; (int64)num == 0 prints "0".
ENERGY_J = [
    (1500, "1.50K"),  # 1.5 not whole: two decimals
    (12340, "12.34K"), (2000, "2K"), (999, "999"), (1000, "1K"),
    (1_500_000, "1.50M"), (2_345_678_901, "2.35G"),  # 2.345678901 -> %.2f 2.35
    (999_999, "1000.00K"),  # divided once (999999 >= 1000), 999.999 < 1000: %.2f rounds up, no step
    (1_005, "1.00K"),  # 1.005 is 1.00499999... in binary: %.2f gives 1.00, as glibc printf
    (0, "0"),
]
MEMORY_B = [
    (1536 * MB, "1.50G"),  # 1536 % 512 == 0: one more step, 1.5 G
    (4000 * MB, "4000M"),  # 4000 % 512 != 0: stays in M
    (2560 * MB, "2.50G"), (1280 * MB, "1280M"),  # 1280 % 512 = 256: 1.25 G is not "precise"
    (1234 * 1024, "1234K"), (2_046_780 * 1024, "2046780K"),  # MaxRSS as sacct prints it (KiB multiples)
    (1024, "1K"), (512, "512"), (4_194_304_001, "4194304001"),  # not a multiple of 512: bytes, as they are
    (64 * GB, "64G"), (3 * 1024 ** 4, "3T"), (0, "0"),
]


@pytest.mark.parametrize("j, text", ENERGY_J)
def test_format_energy_as_sacct(j, text):
    assert format_energy(j) == text


@pytest.mark.parametrize("b, text", MEMORY_B)
def test_format_memory_as_sacct(b, text):
    assert format_memory(b) == text


def test_format_energy_hand_values():
    assert format_energy(None) == ""


@pytest.mark.parametrize("text,bare,expect", [
    ("4000M", "M", (4000 * MB, "")), ("4G", "M", (4 * GB, "")), ("4000", "M", (4000 * MB, "")),
    ("2Gn", "M", (2 * GB, "node")), ("500Mc", "M", (500 * MB, "cpu")), ("1.50G", "M", (int(1.5 * GB), "")),
    ("1234K", "", (1234 * 1024, "")), ("0", "M", (0, "")), ("1T", "M", (1024 ** 4, "")),
])
def test_memory_hand_values(text, bare, expect):
    assert parse_memory(text, bare_unit=bare) == expect


def test_memory_suffix_is_1024_energy_1000():
    assert parse_suffixed("1K", 1024) == 1024 and parse_suffixed("1K", 1000) == 1000


def test_requested_memory():
    # SLURM_MEM_PER_NODE=4000 (MB) -> 4000 x 1048576 = 4194304000 bytes
    assert requested_memory_bytes(per_node="4000")[0] == 4_194_304_000
    # SLURM_MEM_PER_CPU=1500 x 4 CPUs on this node = 6000 MB
    assert requested_memory_bytes(per_cpu="1500", cpus_on_node=4)[0] == 6000 * MB
    # 0 = the whole node
    assert requested_memory_bytes(per_node="0", node_mem_bytes=64 * GB) == (64 * GB, "0 = all of the node's memory")
    assert requested_memory_bytes(per_node="0")[0] is None
    assert requested_memory_bytes(per_cpu="2G")[0] is None  # CPUs unknown: not guessed
    assert requested_memory_bytes() == (None, "no memory request known")
    with pytest.raises(SlurmFormatError, match="mem_per_node"):
        requested_memory_bytes(per_node="lots")


@given(st.integers(min_value=0, max_value=2 ** 50))
def test_memory_format_round_trip(b):
    # whole units come back exactly; two-decimal ones within half a hundredth of their unit
    text = format_memory(b)
    back, _ = parse_memory(text, bare_unit="")
    unit = 1024 ** ("KMGTP".index(text[-1]) + 1) if text[-1] in "KMGTP" else 1
    assert abs(back - b) <= 0.005 * unit + 1


def test_format_memory_hand_values():
    assert format_memory(None) == ""
