"""The site config as the commands read it, and the store URL in force: one place for every command.

Three readings, one per need:

* :func:`load_site` -> :class:`Site`: what a reader (``jobenergy``, ``rollup``) takes from the site
  config (store URL, admins, time zone, interim period) and where it came from, from the hooks'
  resolved copy when that is readable here (no pydantic import). ``strict=False`` (``jobenergy``):
  an invalid key is a warning and its default is used; ``strict=True`` (``rollup``): a bad file is
  a ConfigError naming the key.
* :func:`site_config`: the whole :class:`~slurm_energy.config.schema.SiteConfig`, strict (``collect``,
  ``prune``, ``reconcile``): a bad file is a ConfigError naming the key.
* :class:`LenientSiteConfig`: the whole config as the hooks read it (lenient, last good copy), read
  once on first use, never raising (``predict``, ``calibration``: a prediction works without one).

:func:`store_url` is the one rule for the store a command opens: ``--store``, else
``$SLURM_ENERGY_STORE``, else the site config's ``paths.store_url``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from slurm_energy.config.schema import SiteConfig
    from slurm_energy.store.urls import StoreUrl


class Site(NamedTuple):
    """What a reader takes from the site config, and where it came from (for messages)."""

    store_url: str
    admins: list[str]
    timezone: str
    origin: str  # "site config /etc/slurm-energy/site.yaml" or "site config: none found, defaults used; ..."
    warnings: list[str]
    interim_s: float = 60.0  # sampling.interim_s: how often a running job's record is updated, s


def _resolved_site(strict: bool) -> Site | None:
    """:class:`Site` from the hooks' resolved copy of the site config, else the readers' copy beside
    it (``paths.store_url``, ``admins``, ``timezone``, ``source_path``, ``sampling.interim_s``,
    readable by whoever may read site.yaml), when it matches site.yaml's text
    (:func:`slurm_energy.slurm.config_cache.reader_config`: no pydantic import). None otherwise, and
    with ``strict`` also when the copy records a problem (the strict load then names it)."""
    from slurm_energy.slurm.config_cache import reader_config

    got = reader_config()
    if got is None or (strict and got[1]):
        return None
    c, problems, p = got
    try:
        return Site(c.paths.store_url, list(c.get("admins") or []), c.get("timezone") or "UTC",
                    f"site config {c.get('source_path') or p}", problems, float(c.sampling.interim_s))
    except (AttributeError, KeyError, TypeError):
        return None


def load_site(*, strict: bool = False) -> Site:
    """The site config for a reader. ``strict=False``: leniently, an invalid key is reported
    (``warnings``) and its default used, so a typo in site.yaml does not stop ``jobenergy``
    (``slurm_energy.config.load_site_config_for_hooks``, without saving a last good copy); never
    raises ConfigError. ``strict=True``: :func:`site_config` (raises ConfigError for a bad file).
    Either way the hooks' resolved copy when it is readable (and, strict, has no problem)."""
    fast = _resolved_site(strict)
    if fast is not None:
        return fast
    from slurm_energy import config as C

    warnings: list[str] = []
    if strict:
        cfg = site_config()
    else:
        cfg, warnings = C.load_site_config_for_hooks(save=False)  # as the hooks: last good copy if unparsable
    if cfg.source_path:
        origin = f"site config {cfg.source_path}"
    elif os.environ.get(C.schema.ENV_VAR):
        origin = f"site config ${C.schema.ENV_VAR}={os.environ[C.schema.ENV_VAR]} unreadable, defaults used"
    else:
        origin = f"site config: none found, defaults used; set {C.schema.ENV_VAR} or create {C.schema.DEFAULT_PATH}"
    return Site(cfg.paths.store_url, list(cfg.admins), cfg.timezone, origin, list(warnings),
                float(cfg.sampling.interim_s))


def site_config() -> SiteConfig:
    """The whole site config, strict (``$SLURM_ENERGY_CONFIG``, else /etc/slurm-energy/site.yaml;
    documented defaults without one). Raises ConfigError naming the bad key."""
    from slurm_energy.config import load_site_config

    return load_site_config()


class LenientSiteConfig:
    """The whole site config as the hooks read it (lenient, last good copy, ``$SLURM_ENERGY_CONFIG``
    else /etc/slurm-energy/site.yaml), read once, on first use, for one command run. Never raises:
    an invalid key falls back to its default with a warning on stderr (``slurm-energy COMMAND:
    warning: ...``, once), an unreadable file gives ``None`` and the reason."""

    def __init__(self, command: str) -> None:
        self.command = command
        self._got: tuple[SiteConfig | None, str] | None = None

    def get(self) -> tuple[SiteConfig | None, str]:
        """``(SiteConfig or None, note)``: the note names the file, or why there is none."""
        if self._got is None:
            try:
                from slurm_energy import config as C

                cfg, warnings = C.load_site_config_for_hooks(save=False)
                for w in warnings:  # an invalid key falls back to its default: say so, as jobenergy does
                    print(f"slurm-energy {self.command}: warning: {w}", file=sys.stderr)
                self._got = (cfg, f"site config {cfg.source_path}" if cfg.source_path else "no site config")
            except Exception as e:
                self._got = (None, f"site config unreadable: {e}")
        return self._got

    def store_url(self) -> str:
        """The site's ``paths.store_url``. Raises LookupError: the site config is unreadable."""
        cfg, note = self.get()
        if cfg is None:
            raise LookupError(note)
        return cfg.paths.store_url


def store_url(store_arg: str | None, config_url: str | Callable[[], str]) -> StoreUrl:
    """The store URL in force and where it came from: ``--store`` (``store_arg``), else
    ``$SLURM_ENERGY_STORE``, else the site config's ``paths.store_url`` (``config_url``: the URL, or
    a function returning it, called only when needed: a command given ``--store`` never reads the
    site config). :func:`slurm_energy.store.urls.resolve_store_url`; raises ValueError: empty ``--store``."""
    from slurm_energy.store.urls import resolve_store_url

    return resolve_store_url(store_arg, config_url)
