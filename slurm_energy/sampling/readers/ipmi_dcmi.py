"""IPMI DCMI "Get Power Reading" through a well-kept tool: FreeIPMI's ``ipmi-dcmi
--get-system-power-statistics`` or ``ipmitool dcmi power reading`` (never a hand-written IPMI client).

DCMI 1.5 (section 6.6.1, Get Power Reading) answers the current power, the minimum, maximum and
average over the BMC's statistics period (W), the IPMI timestamp of the reading and the period, and
whether power measurement is active. The two tools print it as (captures, cited in the tests):

FreeIPMI (ceems-dev/ceems ``pkg/collector/ipmi.go`` comment; its tests' ``freeipmi`` capture)::

    Current Power                        : 332 Watts
    Minimum Power over sampling duration : 68 watts
    Maximum Power over sampling duration : 504 watts
    Average Power over sampling duration : 348 watts
    Time Stamp                           : 11/03/2023 - 08:36:29
    Statistics reporting time period     : 2685198000 milliseconds
    Power Measurement                    : Active

ipmitool (influxdata/telegraf#1566; openbmc/openbmc#3257)::

    Instantaneous power reading:                   167 Watts
    Minimum during sampling period:                124 Watts
    Maximum during sampling period:                422 Watts
    Average power reading over sample period:      156 Watts
    IPMI timestamp:                           Mon Aug  1 21:22:51 2016
    Sampling period:                          00699043 Seconds.
    Power reading state is:                   activated

:func:`parse_power_reading` reads either; :class:`DcmiReader` runs the tool in-band (``/dev/ipmi0``)
or, where a site names one, against a BMC over lanplus with a password from a root-only file.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading

DEVICE_ID = "ipmi-dcmi"
#: The tools' timeout, s: a BMC answers in 50 ms to several seconds.
DEFAULT_TIMEOUT_S = 5.0

_NUM = r"\s*[:]?\s*(\d+)\s*[Ww]atts"
_FIELDS = {
    "current_w": (r"^\s*Current Power" + _NUM, r"^\s*Instantaneous power reading" + _NUM),
    "min_w": (r"^\s*Minimum Power over sampling duration" + _NUM, r"^\s*Minimum during sampling period" + _NUM),
    "max_w": (r"^\s*Maximum Power over sampling duration" + _NUM, r"^\s*Maximum during sampling period" + _NUM),
    "average_w": (r"^\s*Average Power over sampling duration" + _NUM,
                  r"^\s*Average power reading over sample period" + _NUM),
}


@dataclass(frozen=True)
class DcmiPowerReading:
    """One DCMI Get Power Reading: W; ``timestamp`` epoch s (None where the BMC gives none or
    1970-01-01, which OpenBMC answers when it keeps no statistics); ``period_s`` the statistics
    period, s; ``active`` whether the BMC says power measurement is active."""

    current_w: int
    min_w: int | None
    max_w: int | None
    average_w: int | None
    timestamp: float | None
    period_s: float | None
    active: bool


class DcmiParseError(ValueError):
    """The tool's output holds no power reading."""


def _timestamp(text: str) -> float | None:
    m = re.search(r"^\s*Time Stamp\s*:\s*(\d\d/\d\d/\d{4} - \d\d:\d\d:\d\d)", text, re.M)
    fmt = "%m/%d/%Y - %H:%M:%S"
    if not m:
        m = re.search(r"^\s*IPMI timestamp:\s*(\w{3} \w{3}\s+\d+ \d\d:\d\d:\d\d \d{4})", text, re.M)
        fmt = "%a %b %d %H:%M:%S %Y"
    if not m:
        return None
    try:
        ts = datetime.strptime(" ".join(m.group(1).split()) if "IPMI" in m.group(0) else m.group(1), fmt)
    except ValueError:
        return None
    t = ts.replace(tzinfo=timezone.utc).timestamp()  # BMCs keep UTC (or an unknown zone: only deltas used)
    return None if t <= 0 else t


def parse_power_reading(text: str) -> DcmiPowerReading:
    """The reading in ``ipmi-dcmi --get-system-power-statistics`` or ``ipmitool dcmi power reading``
    output. Raises :class:`DcmiParseError` naming what is missing."""
    vals: dict[str, int | None] = {}
    for key, pats in _FIELDS.items():
        vals[key] = None
        for p in pats:
            m = re.search(p, text, re.M)
            if m:
                vals[key] = int(m.group(1))
                break
    cur = vals["current_w"]
    if cur is None:
        raise DcmiParseError("no 'Current Power' / 'Instantaneous power reading' line in the DCMI tool's output")
    period = None
    m = re.search(r"^\s*Statistics reporting time period\s*:\s*(\d+)\s*milliseconds", text, re.M)
    if m:
        period = int(m.group(1)) / 1000.0
    else:
        m = re.search(r"^\s*Sampling period:\s*(\d+)\s*Seconds", text, re.M)
        if m:
            period = float(int(m.group(1)))
    active = bool(re.search(r"^\s*Power Measurement\s*:\s*Active", text, re.M)
                  or re.search(r"Power reading state is:\s*activated", text))
    return DcmiPowerReading(cur, vals["min_w"], vals["max_w"], vals["average_w"], _timestamp(text), period, active)


Runner = Callable[[Sequence[str], float], str]


def run_tool(argv: Sequence[str], timeout_s: float) -> str:
    """Run ``argv`` (absolute tool path), its stdout; raises OSError / subprocess errors."""
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=True,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"})
    return p.stdout


def tool_argv(tool: str, path: str, host: str = "", user: str = "", password_file: str = "", port: int = 623,
              cipher_suite: int | None = None) -> list[str]:
    """The command line: ``tool`` ``freeipmi`` or ``ipmitool`` at ``path``; ``host`` empty = in-band;
    ``port``: the BMC's RMCP+ UDP port; ``cipher_suite``: ipmitool's ``-C`` (None: it asks the BMC,
    which costs seconds on a BMC that does not answer Get Channel Cipher Suites)."""
    if tool == "freeipmi":
        if host:
            raise ValueError("node_meter.ipmi_dcmi: a network BMC ('host') is read with ipmitool "
                             "(its -f password file); set tool: ipmitool")
        return [path, "--get-system-power-statistics"]
    argv = [path]
    if host:
        argv += ["-I", "lanplus", "-H", host, "-U", user, "-f", password_file]
        if port != 623:
            argv += ["-p", str(port)]
        if cipher_suite is not None:
            argv += ["-C", str(cipher_suite)]
    return argv + ["dcmi", "power", "reading"]


class DcmiReader(Reader):
    """The node's DCMI power reading (``power_integration``, W: the BMC's current power).

    Flags: ``meter_inactive`` (the BMC says power measurement is not active), ``meter_stale`` (the
    IPMI timestamp did not move between two reads), ``meter_timeout`` / ``meter_error`` (the tool
    failed: the reading is ``unavailable``). ``requests`` counts the tool's runs (BMC requests).
    """

    name = "ipmi-dcmi"
    device_class = "node"

    def __init__(self, argv: Sequence[str], runner: Runner = run_tool, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.argv = list(argv)
        self._run = runner
        self.timeout_s = timeout_s
        self.requests = 0
        self.last: DcmiPowerReading | None = None

    def devices(self) -> list[DeviceStatic]:
        return [DeviceStatic("node", DEVICE_ID, model="IPMI DCMI Get Power Reading", extra={
            "tool": self.argv[0], "covers": "whole node as the BMC measures it (PSU input or board sensors)"})]

    def read(self) -> list[Reading]:
        self.requests += 1
        try:
            r = parse_power_reading(self._run(self.argv, self.timeout_s))
        except subprocess.TimeoutExpired:
            return [Reading("node", DEVICE_ID, "unavailable", flags=["meter_timeout"])]
        except (OSError, subprocess.SubprocessError, DcmiParseError):
            return [Reading("node", DEVICE_ID, "unavailable", flags=["meter_error"])]
        flags: list[str] = []
        if not r.active:
            flags.append("meter_inactive")
        prev, self.last = self.last, r
        if prev is not None and r.timestamp is not None and r.timestamp == prev.timestamp:
            flags.append("meter_stale")
        return [Reading("node", DEVICE_ID, "power_integration", power_w=float(r.current_w), flags=flags)]
