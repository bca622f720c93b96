"""Where ``jobenergy`` finds its store, admins, time zone and interim period: the site config, read
leniently (an invalid key is a warning and its default is used), from the hooks' resolved copy when
that is readable here (no pydantic import), and how to name it in messages."""

from __future__ import annotations

import os
from typing import NamedTuple


class Site(NamedTuple):
    """What jobenergy takes from the site config, and where it came from (for messages)."""

    store_url: str
    admins: list
    timezone: str
    origin: str  # "site config /etc/slurm-energy/site.yaml" or "site config: none found, defaults used; ..."
    warnings: list
    interim_s: float = 60.0  # sampling.interim_s: how often a running job's record is updated, s


def _resolved_site() -> Site | None:
    """:class:`Site` from the hooks' resolved copy of the site config, else the readers' copy beside
    it (``paths.store_url``, ``admins``, ``timezone``, ``source_path``, ``sampling.interim_s``,
    readable by whoever may read site.yaml), when it matches site.yaml's text
    (:func:`slurm_energy.slurm.hooks.config_cache.reader_config`: no pydantic import). None otherwise."""
    from slurm_energy.slurm.hooks.config_cache import reader_config

    got = reader_config()
    if got is None:
        return None
    c, problems, p = got
    try:
        return Site(c.paths.store_url, list(c.get("admins") or []), c.get("timezone") or "UTC",
                    f"site config {c.get('source_path') or p}", problems, float(c.sampling.interim_s))
    except (AttributeError, KeyError, TypeError):
        return None


def load_site() -> Site:
    """The site config, leniently: an invalid key is reported (``warnings``) and its default used,
    so a typo in site.yaml does not stop ``jobenergy`` (``slurm_energy.config.load_site_config_for_hooks``,
    without saving a last good copy; the hooks' resolved copy of it when readable). Never raises ConfigError."""
    fast = _resolved_site()
    if fast is not None:
        return fast
    from slurm_energy import config as C

    cfg, warnings = C.load_site_config_for_hooks(save=False)  # as the hooks: last good copy if unparsable
    if cfg.source_path:
        origin = f"site config {cfg.source_path}"
    elif os.environ.get(C.schema.ENV_VAR):
        origin = f"site config ${C.schema.ENV_VAR}={os.environ[C.schema.ENV_VAR]} unreadable, defaults used"
    else:
        origin = f"site config: none found, defaults used; set {C.schema.ENV_VAR} or create {C.schema.DEFAULT_PATH}"
    return Site(cfg.paths.store_url, list(cfg.admins), cfg.timezone, origin, list(warnings),
                float(cfg.sampling.interim_s))
