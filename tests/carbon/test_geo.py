"""Opt-in geolocation against a local HTTP server: success, cache, timeout, bad answers, offline."""

import json
import socket
import time

import pytest
from werkzeug.wrappers import Response

from slurm_energy.carbon import geo
from slurm_energy.config.carbon import resolve_carbon

GEOJS = {"ip": "192.0.2.7", "country_code": "SE", "country_code3": "SWE", "country": "Sweden"}


@pytest.fixture
def geo_site(site_config, tmp_path):
    """A site config with geolocation on at ``url`` (0.5 s timeout), its cache under tmp_path/geo; ``kw``: more keys."""
    def make(url, **kw):
        return site_config(bare=True, geolocation={"enabled": True, "url": url, "timeout_s": 0.5},
                           paths={"spool_dir": str(tmp_path)}, **kw)
    return make


def test_geolocated_country_used_and_cached_per_node(httpserver, tmp_path, geo_site):
    httpserver.expect_request("/v1/ip/geo.json").respond_with_json(GEOJS)
    cfg = geo_site(httpserver.url_for("/v1/ip/geo.json"))
    f = resolve_carbon(cfg, node="n1")
    # owid/derived_latest_by_country.csv: SE,SWE,Sweden,2024,35.82
    assert f.ci_g_per_kwh == pytest.approx(35.82)
    assert f.ci_source.startswith("geolocation (geojs) country SE")
    assert len(httpserver.log) == 1
    again = resolve_carbon(cfg, node="n1")
    assert again.ci_g_per_kwh == pytest.approx(35.82) and "cached" in again.ci_source
    assert len(httpserver.log) == 1  # served from <spool>/geo/n1.json
    assert json.loads((tmp_path / "geo" / "n1.json").read_text())["country"] == "SE"
    resolve_carbon(cfg, node="n2")
    assert len(httpserver.log) == 2  # cache is per node


def test_offline_forbids_the_request(httpserver, tmp_path, geo_site):
    httpserver.expect_request("/g").respond_with_json(GEOJS)
    cfg = geo_site(httpserver.url_for("/g"), offline=True)
    f = resolve_carbon(cfg, node="n1")
    assert len(httpserver.log) == 0
    assert f.ci_g_per_kwh == 475.0 and "offline" in f.ci_source and "ci" in f.defaults_used
    # the argument overrides the config either way
    cfg2 = geo_site(httpserver.url_for("/g"))
    resolve_carbon(cfg2, node="n1", offline=True)
    assert len(httpserver.log) == 0


def test_disabled_by_default_makes_no_request(httpserver, tmp_path, site_config):
    httpserver.expect_request("/g").respond_with_json(GEOJS)
    cfg = site_config(bare=True, geolocation={"url": httpserver.url_for("/g")}, paths={"spool_dir": str(tmp_path)})
    assert resolve_carbon(cfg, node="n1").ci_g_per_kwh == 475.0
    assert len(httpserver.log) == 0


def test_site_country_beats_geolocation(httpserver, tmp_path, geo_site):
    httpserver.expect_request("/g").respond_with_json(GEOJS)
    cfg = geo_site(httpserver.url_for("/g"), location={"country": "FR"})
    assert resolve_carbon(cfg, node="n1").ci_g_per_kwh == pytest.approx(44.18)  # OWID France 2024
    assert len(httpserver.log) == 0


def test_timeout(httpserver, tmp_path):
    def slow(request):
        time.sleep(1.0)
        return Response(json.dumps(GEOJS), content_type="application/json")

    httpserver.expect_request("/slow").respond_with_handler(slow)
    r = geo.locate("n1", url=httpserver.url_for("/slow"), timeout_s=0.2, cache_dir=str(tmp_path))
    assert r.country is None and "timed out after 0.2 s" in r.error
    assert not (tmp_path / "n1.json").exists()  # failures are not cached


@pytest.mark.parametrize("body, match", [
    (json.dumps({"ip": "192.0.2.7", "country": "Sweden"}), "no valid country_code"),
    (json.dumps({"country_code": "Sweden"}), "no valid country_code"),
    ("<html>busy</html>", "not JSON"),
])
def test_bad_answers(httpserver, tmp_path, geo_site, body, match):
    httpserver.expect_request("/g").respond_with_data(body, content_type="application/json")
    r = geo.locate("n1", url=httpserver.url_for("/g"), timeout_s=1, cache_dir=str(tmp_path))
    assert r.country is None and match in r.error
    f = resolve_carbon(geo_site(httpserver.url_for("/g")), node="n1")
    assert f.ci_g_per_kwh == 475.0 and "geolocation gave no country" in f.ci_source


def test_http_error_status(httpserver, tmp_path):
    httpserver.expect_request("/g").respond_with_data("no", status=503)
    r = geo.locate("n1", url=httpserver.url_for("/g"), timeout_s=1, cache_dir=str(tmp_path))
    assert r.country is None and "HTTPError" in r.error


def test_no_network(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connection refused
    r = geo.locate("n1", url=f"http://127.0.0.1:{port}/g", timeout_s=0.5, cache_dir=str(tmp_path))
    assert r.country is None and "request failed" in r.error


def test_country_not_in_table_is_not_replaced_by_another(httpserver, tmp_path, geo_site):
    httpserver.expect_request("/g").respond_with_json({"country_code": "ZZ"})
    f = resolve_carbon(geo_site(httpserver.url_for("/g")), node="n1")
    assert f.ci_g_per_kwh == 475.0 and "'ZZ' is not in the bundled table" in f.ci_source


def test_stale_or_corrupt_cache_ignored(tmp_path):
    (tmp_path / "n1.json").write_text(json.dumps({"country": "SE", "fetched_at": 0}))
    assert geo.read_cache(str(tmp_path), "n1") is None  # 1970: older than 30 days
    (tmp_path / "n1.json").write_text("{not json")
    assert geo.read_cache(str(tmp_path), "n1") is None
