"""Site configuration: one validated YAML file (``site.yaml``) with the facts only an admin knows.

* :mod:`~slurm_energy.config.schema` -- the pydantic models (:class:`SiteConfig` and its sections);
* :mod:`~slurm_energy.config.load` -- strict loading (``check-config``, ``run``, the CLI); errors are
  :class:`ConfigError`, naming the field (dotted path), the bad value and the fix;
* :mod:`~slurm_energy.config.lenient` -- the hooks' loading: every valid part kept, an unparsable
  file replaced by its last good copy; every message says what is in force.

Where the file is found: the path given, else ``$SLURM_ENERGY_CONFIG``, else
``/etc/slurm-energy/site.yaml``, else documented defaults (``defaults_used`` says which).
``site_config/site.yaml`` in the repository is the documented example of every key.

What the facts mean for a job is resolved elsewhere: carbon facts by
:func:`slurm_energy.config.carbon.resolve_carbon`, rated power by :mod:`slurm_energy.devices.rated`.
This package imports pydantic and yaml, not pandas.
"""

from slurm_energy.config.lenient import (
                                         last_good_path,
                                         load_site_config_for_hooks,
                                         load_site_config_lenient,
                                         save_last_good,
                                         site_config_from_dict_lenient,
)
from slurm_energy.config.load import DuplicateKeyError, load_site_config, site_config_from_dict
from slurm_energy.config.schema import DEFAULT_PUE, Paths, SiteConfig
from slurm_energy.errors import ConfigError

__all__ = [
    "DEFAULT_PUE", "ConfigError", "DuplicateKeyError", "Paths", "SiteConfig", "last_good_path", "load_site_config",
    "load_site_config_for_hooks", "load_site_config_lenient", "save_last_good", "site_config_from_dict",
    "site_config_from_dict_lenient",
]
