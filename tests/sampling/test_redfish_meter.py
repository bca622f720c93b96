"""The Redfish node meter against a real Redfish emulator (sushy-tools' ``sushy-static`` serving
the mockups of tests/fakes/redfish.py over HTTPS with a self-signed certificate), and against a real
HTTP server (pytest-httpserver) for what the static emulator cannot answer: 401, 503/429, a timeout."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
from werkzeug import Response

from slurm_energy.config.schema import NodeMeter
from slurm_energy.sampling.readers import node_meter, redfish
from tests.fakes import redfish as mockups

SUSHY = os.path.join(os.path.dirname(sys.executable), "sushy-static")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    crt, key = str(d / "bmc.crt"), str(d / "bmc.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", crt],
                   check=True, capture_output=True)
    return crt, key


@pytest.fixture
def emulator(tmp_path, cert):
    if not os.path.exists(SUSHY):
        pytest.skip("sushy-tools is not installed in this venv (pip install sushy-tools)")
    procs = []

    def start(build) -> str:
        root = build(tmp_path / f"mock{len(procs)}")
        port = _port()
        p = subprocess.Popen([SUSHY, "-i", "127.0.0.1", "-p", str(port), "-m", root, "-c", cert[0], "-k", cert[1]],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        return f"https://127.0.0.1:{port}"

    yield start
    for p in procs:
        p.terminate()
        p.wait(5)


def _creds(tmp_path, mode=0o600) -> str:
    p = tmp_path / "cred"
    p.write_text("root:calvin\n")
    os.chmod(p, mode)
    return str(p)


def _reader(url, verify, **kw):
    return redfish.RedfishReader(url, redfish.make_session("root", "calvin", verify, backoff_s=0.01), **kw)


def test_environment_metrics_power_from_dmtf_mockup(emulator, cert):
    url = emulator(mockups.dmtf_rackmount)
    r = _reader(url, cert[0])
    [x] = r.read()
    assert x.method == "power_integration" and x.power_w == 374.0  # EnvironmentMetrics.PowerWatts.Reading, W
    assert r.requests == 3  # Chassis, Chassis/1U, EnvironmentMetrics
    r.read()
    assert r.requests == 4  # discovery kept: one request a reading after the first


def test_power_control_from_dell_shape_skips_the_enclosure(emulator, cert):
    url = emulator(mockups.dell_idrac)
    [x] = _reader(url, cert[0]).read()
    assert x.power_w == 182.0  # Power.PowerControl[0].PowerConsumedWatts of System.Embedded.1, W


def test_self_signed_certificate_refused_without_the_ca_or_insecure(emulator):
    url = emulator(mockups.dmtf_rackmount)
    assert _reader(url, True).read()[0].flags == ["meter_error"]
    assert _reader(url, False).read()[0].power_w == 374.0  # insecure: only where site.yaml says so


def test_open_node_meter_redfish_from_site_config(emulator, cert, tmp_path):
    url = emulator(mockups.dell_idrac)
    cfg = NodeMeter(source="redfish", redfish={"url": url, "credentials_file": _creds(tmp_path), "ca_file": cert[0]})
    reader, note = node_meter.open_node_meter(cfg)
    assert note == f"node meter: Redfish {url}" and reader.read()[0].power_w == 182.0


def test_credentials_file_readable_by_others_is_refused(tmp_path):
    with pytest.raises(redfish.CredentialsError, match="chmod 600"):
        redfish.read_credentials(_creds(tmp_path, 0o644))
    assert redfish.read_credentials(_creds(tmp_path)) == ("root", "calvin")


def _chassis(httpserver):
    httpserver.expect_request("/redfish/v1/Chassis").respond_with_json(
        {"Members": [{"@odata.id": "/redfish/v1/Chassis/1"}]})
    httpserver.expect_request("/redfish/v1/Chassis/1").respond_with_json(
        {"Power": {"@odata.id": "/redfish/v1/Chassis/1/Power"}})


def test_wrong_password_is_meter_auth(httpserver):
    httpserver.expect_request("/redfish/v1/Chassis").respond_with_data("", status=401)
    [x] = _reader(httpserver.url_for(""), False).read()
    assert x.method == "unavailable" and x.flags == ["meter_auth"]


def test_503_then_answer_is_retried_with_backoff(httpserver):
    _chassis(httpserver)
    answers = [Response("busy", status=503, headers={"Retry-After": "0"}),
               Response("slow down", status=429, headers={"Retry-After": "0"}),
               Response('{"PowerControl": [{"PowerConsumedWatts": 401}]}', content_type="application/json")]
    httpserver.expect_request("/redfish/v1/Chassis/1/Power").respond_with_handler(lambda req: answers.pop(0))
    [x] = _reader(httpserver.url_for(""), False).read()
    assert x.power_w == 401.0 and answers == []  # 503, 429, then 200: three tries of one GET


def test_503_for_ever_gives_up_unavailable(httpserver):
    _chassis(httpserver)
    httpserver.expect_request("/redfish/v1/Chassis/1/Power").respond_with_data("busy", status=503)
    [x] = _reader(httpserver.url_for(""), False).read()
    assert x.method == "unavailable" and x.flags == ["meter_error:http_503"]


def test_timeout_is_meter_timeout(httpserver):
    _chassis(httpserver)

    def slow(req):
        time.sleep(1.0)
        return Response("{}", content_type="application/json")

    httpserver.expect_request("/redfish/v1/Chassis/1/Power").respond_with_handler(slow)
    [x] = _reader(httpserver.url_for(""), False, timeout_s=0.2).read()
    assert x.method == "unavailable" and x.flags == ["meter_timeout"]
