"""The one typed, frozen view of ``hardware`` that the readers and rated-power look-ups take,
the same from the validated model (sampler, finalizer, run) and from the hooks' resolved JSON copy."""

import dataclasses

import pytest

from slurm_energy.config import SiteConfig
from slurm_energy.devices.hardware import GpuRating, HardwareConfig
from slurm_energy.devices.rated import cpu_tdp, gpu_rated


def test_the_view_is_the_same_from_the_model_and_from_its_json_copy():
    cfg = SiteConfig.model_validate({"hardware": {"cpu_tdp_w": {"Mystery CPU": 95}, "ram_w_per_gb": 0.5,
                                                  "gpu": {"L40S": {"rated_w": 350}}, "rapl_root": "/x/powercap"}})
    a = HardwareConfig.of(cfg.hardware)
    b = HardwareConfig.of(cfg.model_dump(mode="json")["hardware"])
    assert a == b
    assert a.cpu_tdp_w == {"Mystery CPU": 95.0} and a.ram_w_per_gb == 0.5 and a.rapl_root == "/x/powercap"
    assert a.gpu == {"L40S": GpuRating(rated_w=350.0)}
    assert HardwareConfig.of(a) is a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.ram_w_per_gb = 1.0  # type: ignore[misc]


def test_defaults_are_the_schemas_and_an_older_copy_without_a_key_takes_them():
    assert HardwareConfig.of(SiteConfig().hardware) == HardwareConfig()
    assert HardwareConfig.of({"ram_w_per_gb": 0.5}) == HardwareConfig(ram_w_per_gb=0.5)


def test_rated_power_look_ups_take_the_view():
    hw = HardwareConfig.of({"cpu_tdp_default_w": 90, "gpu_fallback_w": 250})
    assert cpu_tdp(hw, "Mystery CPU", 4)[:2] == (90.0, 22.5)  # 90 W per socket / 4 cores
    assert gpu_rated(hw, "NVIDIA Mystery 9000")[0] == 250.0
