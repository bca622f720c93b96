"""Opt-in IP geolocation of a node (geojs), for the country of its grid when nothing else is known.

Off by default (``geolocation.enabled: false`` in site.yaml). One HTTPS GET to
``https://get.geojs.io/v1/ip/geo.json`` (fields used: ``country_code`` ISO 3166 alpha-2, ``ip``),
short timeout, result cached per node in ``<spool>/geo/<node>.json``. ``offline`` forbids the
request (a cached answer is still used: it needs no network). Never raises for network or data
problems: :class:`GeoResult` carries the error text instead.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass

from slurm_energy.fileio import atomic_write

#: Cached answers older than this are refreshed (when online): 30 days, s.
CACHE_MAX_AGE_S = 30 * 86400.0


@dataclass
class GeoResult:
    """Outcome of a geolocation: ``country`` (ISO alpha-2, upper case) or None with ``error``."""

    country: str | None
    how: str = ""  # "geojs", "cached 2026-11-30", ""
    error: str = ""
    ip: str = ""


def _cache_path(cache_dir: str, node: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", node) or "node"
    return os.path.join(cache_dir, f"{safe}.json")


def read_cache(cache_dir: str, node: str, max_age_s: float = CACHE_MAX_AGE_S,
               now: float | None = None) -> GeoResult | None:
    """The cached answer for ``node`` if present, well-formed and younger than ``max_age_s``."""
    p = _cache_path(cache_dir, node)
    try:
        with open(p, encoding="utf-8") as fh:
            d = json.load(fh)
        cc, t = str(d["country"]), float(d["fetched_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not re.fullmatch(r"[A-Z]{2}", cc) or (now if now is not None else time.time()) - t > max_age_s:
        return None
    return GeoResult(cc, how=f"cached {time.strftime('%Y-%m-%d', time.gmtime(t))}", ip=str(d.get("ip", "")))


def _write_cache(cache_dir: str, node: str, res: GeoResult, url: str) -> None:
    try:
        os.makedirs(cache_dir, exist_ok=True)
        atomic_write(_cache_path(cache_dir, node),
                     json.dumps({"country": res.country, "ip": res.ip, "fetched_at": time.time(), "url": url}))
    except OSError:
        pass  # a cache we cannot write only costs another request next time


def fetch_country(url: str, timeout_s: float = 2.0) -> GeoResult:
    """GET ``url`` (geojs ``geo.json`` format) and return the ISO alpha-2 ``country_code``.

    Errors (timeout, connection, HTTP status, bad JSON, missing/invalid ``country_code``) are
    returned in ``GeoResult.error``; never raises.
    """
    import requests

    try:
        r = requests.get(url, timeout=timeout_s, headers={"Accept": "application/json"})
        r.raise_for_status()
    except requests.Timeout:
        return GeoResult(None, error=f"geojs timed out after {timeout_s:g} s ({url})")
    except requests.RequestException as e:
        return GeoResult(None, error=f"geojs request failed ({url}): {type(e).__name__}")
    try:
        d = r.json()
    except ValueError:
        return GeoResult(None, error=f"geojs answer is not JSON ({url})")
    if isinstance(d, list) and len(d) == 1:  # geo.json?ip=a answers a one-element list
        d = d[0]
    cc = d.get("country_code") if isinstance(d, dict) else None
    if not isinstance(cc, str) or not re.fullmatch(r"[A-Za-z]{2}", cc.strip()):
        return GeoResult(None, error=f"geojs answer has no valid country_code field (got {cc!r})")
    return GeoResult(cc.strip().upper(), how="geojs", ip=str(d.get("ip", "")))


def locate(node: str, *, url: str, timeout_s: float = 2.0, cache_dir: str,
           offline: bool = False, max_age_s: float = CACHE_MAX_AGE_S) -> GeoResult:
    """Country of ``node``'s public IP: the cache, else (unless ``offline``) geojs, then cached.

    :param node: node name (cache key).
    :param url: geojs endpoint. :param timeout_s: request timeout, s.
    :param cache_dir: directory of per-node cache files (``<spool>/geo``).
    :param offline: never touch the network.
    Never raises.
    """
    cached = read_cache(cache_dir, node, max_age_s)
    if cached is not None:
        return cached
    if offline:
        return GeoResult(None, error="offline: geolocation not attempted and no cached answer")
    res = fetch_country(url, timeout_s)
    if res.country:
        _write_cache(cache_dir, node, res, url)
    return res
