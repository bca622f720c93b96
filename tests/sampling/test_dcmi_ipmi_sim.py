"""The IPMI DCMI node meter through the real ipmitool against OpenIPMI's BMC simulator ``ipmi_sim``
(Debian ``openipmi``) over lanplus on 127.0.0.1. ipmi_sim answers IPMI (``mc info``) but has no
DCMI group extension: ipmitool reports "Invalid command (c1)" and exits 1, which the reader must
take as ``meter_error`` (never a power); a wrong password and a BMC that does not answer are the
other failures a site meets. Power readings themselves are parsed from captured outputs
(tests/sampling/test_node_meter.py)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest

from slurm_energy.config.schema import NodeMeter
from slurm_energy.sampling.readers import ipmi_dcmi, node_meter

IPMITOOL = shutil.which("ipmitool")
SIM = shutil.which("ipmi_sim")
pytestmark = pytest.mark.skipif(not (IPMITOOL and SIM), reason="needs ipmitool and openipmi (scripts/setup.sh)")

LAN_CONF = """name "se43"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 {port}
    priv_limit admin
    allowed_auths_callback none md5 straight
    allowed_auths_user none md5 straight
    allowed_auths_operator none md5 straight
    allowed_auths_admin none md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  user 2 true "ipmiusr" "test" admin 10 none md5 straight
"""
EMU = "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nmc_enable 0x20\n"


def _udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def bmc(tmp_path):
    port = _udp_port()
    (tmp_path / "lan.conf").write_text(LAN_CONF.format(port=port))
    (tmp_path / "sim.emu").write_text(EMU)
    p = subprocess.Popen([SIM, "-c", str(tmp_path / "lan.conf"), "-f", str(tmp_path / "sim.emu"), "-n",
                          "-s", str(tmp_path / "state")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL)
    pw = tmp_path / "pw"
    pw.write_text("test")
    os.chmod(pw, 0o600)
    for _ in range(50):  # until the simulated BMC answers
        if subprocess.run([IPMITOOL, "-I", "lanplus", "-C", "3", "-N", "1", "-R", "1", "-H", "127.0.0.1", "-p", str(port),
                           "-U", "ipmiusr", "-f", str(pw), "mc", "info"], capture_output=True, timeout=20).returncode == 0:
            break
        time.sleep(0.1)
    yield port, pw
    p.terminate()
    p.wait(5)


def test_bmc_without_dcmi_is_meter_error_never_power(bmc):
    port, pw = bmc
    cfg = NodeMeter(source="ipmi_dcmi", ipmi_dcmi={"host": "127.0.0.1", "port": port, "user": "ipmiusr",
                                                   "password_file": str(pw), "timeout_s": 5,
                                                   "cipher_suite": 3})  # ipmi_sim answers no cipher-suite query
    reader, note = node_meter.open_node_meter(cfg, dev_ipmi=())
    assert note == f"node meter: IPMI DCMI via {IPMITOOL} (127.0.0.1)"
    [r] = reader.read()
    assert r.method == "unavailable" and r.flags == ["meter_error"] and r.power_w is None
    assert reader.requests == 1


def test_wrong_password_is_meter_error(bmc, tmp_path):
    port, _ = bmc
    bad = tmp_path / "bad"
    bad.write_text("nope")
    os.chmod(bad, 0o600)
    r = ipmi_dcmi.DcmiReader(ipmi_dcmi.tool_argv("ipmitool", IPMITOOL, "127.0.0.1", "ipmiusr", str(bad), port, 3),
                             timeout_s=5).read()[0]
    assert r.method == "unavailable" and r.flags == ["meter_error"]


def test_silent_bmc_is_meter_timeout(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("test")
    os.chmod(pw, 0o600)
    argv = ipmi_dcmi.tool_argv("ipmitool", IPMITOOL, "127.0.0.1", "ipmiusr", str(pw), _udp_port())  # nothing listens
    t = time.monotonic()
    r = ipmi_dcmi.DcmiReader(argv, timeout_s=1.0).read()[0]
    assert r.flags == ["meter_timeout"] and r.method == "unavailable"
    assert time.monotonic() - t < 5.0  # bounded by the timeout, not ipmitool's own retries


def test_password_file_readable_by_others_is_refused(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("test")
    os.chmod(pw, 0o644)
    cfg = NodeMeter(source="ipmi_dcmi", ipmi_dcmi={"host": "127.0.0.1", "user": "u", "password_file": str(pw)})
    with pytest.raises(ValueError, match="chmod 600"):
        node_meter.open_node_meter(cfg, dev_ipmi=())
