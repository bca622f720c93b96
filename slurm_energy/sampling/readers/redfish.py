"""Redfish node power through ``requests`` (one kept HTTPS session, urllib3's ``Retry`` for 429/503).

What is read (DMTF Redfish schemas, DSP0268):

* the chassis' ``EnvironmentMetrics`` (schema 1.0+, Redfish 2020.4): ``PowerWatts.Reading`` (W), else
  ``EnergykWh.Reading`` (kWh, a lifetime counter; BMCs often step it by whole kWh, too coarse for
  a 10 s cadence, so power is preferred where both exist);
* else the older ``Power`` resource: ``PowerControl[0].PowerConsumedWatts`` (W).

The chassis is the one a site names (``chassis``), else the first member of ``/redfish/v1/Chassis``
that has either resource. Credentials come from a root-only file (``user:password`` on one line;
a file readable by group or others is refused); TLS is verified against the site's CA file, or not
at all only with the explicit ``insecure: true``. Each request has a timeout; 429 and 503 are
retried with backoff (honouring ``Retry-After``), then the reading is ``unavailable`` with
``meter_timeout``, ``meter_auth`` (401/403) or ``meter_error``.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading

DEVICE_ID = "redfish"
DEFAULT_TIMEOUT_S = 5.0


class CredentialsError(ValueError):
    """The credentials file is missing, readable by others, or not ``user:password``."""


def read_credentials_mode_only(path: str, field: str) -> None:
    """Refuse a secret file group/other may read, or one that is missing (:class:`CredentialsError`)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise CredentialsError(f"{field} {path!r}: {e.strerror}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CredentialsError(f"{field} {path!r} is readable by others (mode {stat.S_IMODE(st.st_mode):o}); "
                               f"chmod 600 it, owned by root")


def read_credentials(path: str) -> tuple[str, str]:
    """``(user, password)`` from ``path`` (``user:password``). Raises :class:`CredentialsError` naming
    the fix: a file group/other may read is refused (chmod 600, owned by root)."""
    read_credentials_mode_only(path, "node_meter.redfish.credentials_file")
    try:
        with open(path, encoding="utf-8") as f:
            line = f.readline().strip()
    except OSError as e:
        raise CredentialsError(f"node_meter.redfish.credentials_file {path!r}: {e.strerror}") from None
    user, sep, pw = line.partition(":")
    if not sep or not user:
        raise CredentialsError(f"node_meter.redfish.credentials_file {path!r}: write one line 'user:password'")
    return user, pw


def make_session(user: str, password: str, verify: bool | str, retries: int = 3,
                 backoff_s: float = 0.5) -> Any:
    """A ``requests.Session`` with basic auth, TLS ``verify`` (CA path or bool) and urllib3 ``Retry``
    on 429/503 (GET only, ``Retry-After`` honoured, ``backoff_s`` x 2^n between tries)."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    s = requests.Session()
    # no proxy or CA bundle from the environment (REQUESTS_CA_BUNDLE would replace ``verify``): the BMC
    # is reached directly and checked against exactly what site.yaml names
    s.trust_env = False
    s.auth = (user, password)
    s.verify = verify
    s.headers["Accept"] = "application/json"
    retry = Retry(total=retries, connect=0, read=False, other=0, status=retries, status_forcelist=(429, 503),
                  allowed_methods=("GET",), backoff_factor=backoff_s, respect_retry_after_header=True,
                  raise_on_status=False)
    s.mount("https://", HTTPAdapter(max_retries=retry))
    s.mount("http://", HTTPAdapter(max_retries=retry))
    return s


def chassis_power(doc_env: dict[str, Any] | None, doc_power: dict[str, Any] | None) -> tuple[float | None, float | None]:
    """``(power_w, energy_kwh)`` from an ``EnvironmentMetrics`` and/or a ``Power`` document."""
    pw = kwh = None
    if doc_env:
        pw = _num((doc_env.get("PowerWatts") or {}).get("Reading"))
        kwh = _num((doc_env.get("EnergykWh") or {}).get("Reading"))
    if pw is None and doc_power:
        for pc in doc_power.get("PowerControl") or []:
            pw = _num(pc.get("PowerConsumedWatts")) if isinstance(pc, dict) else None
            if pw is not None:
                break
    return pw, kwh


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class RedfishReader(Reader):
    """Node power from a BMC's Redfish service (``power_integration`` from the power reading,
    else ``counter`` from ``EnergykWh``). ``requests`` counts HTTP requests sent."""

    name = "redfish"
    device_class = "node"

    def __init__(self, url: str, session: Any, chassis: str = "", timeout_s: float = DEFAULT_TIMEOUT_S):
        self.url = url.rstrip("/")
        self.session = session
        self.chassis = chassis
        self.timeout_s = timeout_s
        self.requests = 0
        self._paths: tuple[str | None, str | None] | None = None  # (EnvironmentMetrics, Power) @odata.ids

    def _get(self, path: str) -> dict[str, Any]:
        self.requests += 1
        r = self.session.get(self.url + path if path.startswith("/") else path, timeout=self.timeout_s)
        r.raise_for_status()
        doc = r.json()
        return doc if isinstance(doc, dict) else {}

    def _discover(self) -> tuple[str | None, str | None]:
        if self._paths is not None:
            return self._paths
        members = [self.chassis] if self.chassis else [
            m.get("@odata.id") for m in self._get("/redfish/v1/Chassis").get("Members") or [] if isinstance(m, dict)]
        for cid in members:
            if not cid:
                continue
            path = cid if cid.startswith("/") else f"/redfish/v1/Chassis/{cid}"
            doc = self._get(path)
            env = (doc.get("EnvironmentMetrics") or {}).get("@odata.id")
            pwr = (doc.get("Power") or {}).get("@odata.id")
            if env or pwr:
                self._paths = (env, pwr)
                return self._paths
        raise LookupError("no chassis with EnvironmentMetrics or Power in the Redfish service")

    def devices(self) -> list[DeviceStatic]:
        return [DeviceStatic("node", DEVICE_ID, model="Redfish chassis power", extra={
            "url": self.url, "chassis": self.chassis or "first with power",
            "covers": "whole chassis as the BMC measures it (PowerControl / EnvironmentMetrics)"})]

    def read(self) -> list[Reading]:
        import requests

        try:
            env, pwr = self._discover()
            pw, kwh = chassis_power(self._get(env) if env else None, None)
            if pw is None and kwh is None and pwr:
                pw, kwh = chassis_power(None, self._get(pwr))
        except requests.exceptions.Timeout:
            return [Reading("node", DEVICE_ID, "unavailable", flags=["meter_timeout"])]
        except requests.exceptions.HTTPError as e:
            code = e.response.status_code if e.response is not None else 0
            fl = "meter_auth" if code in (401, 403) else "meter_error"
            return [Reading("node", DEVICE_ID, "unavailable", flags=[fl if fl == "meter_auth" else f"meter_error:http_{code}"])]
        except (requests.exceptions.RequestException, LookupError, ValueError):
            return [Reading("node", DEVICE_ID, "unavailable", flags=["meter_error"])]
        if pw is not None:  # EnergykWh is often whole kWh (3.6 MJ steps): power at the meter's cadence
            return [Reading("node", DEVICE_ID, "power_integration", power_w=pw)]
        if kwh is not None:
            return [Reading("node", DEVICE_ID, "counter", energy_uj=round(kwh * 3.6e12))]
        return [Reading("node", DEVICE_ID, "unavailable", flags=["meter_error"])]

    def close(self) -> None:
        self.session.close()
