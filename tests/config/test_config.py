"""Site config: loading, validation errors (field, value, fix), resolution order of carbon facts."""

import os
import textwrap

import pytest

from slurm_energy.config import DEFAULT_PUE, ConfigError, load_site_config, site_config_from_dict
from slurm_energy.config.carbon import resolve_carbon
from slurm_energy.devices.rated import cpu_tdp, gpu_rated

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write(site_config, text):
    """tmp_path/site.yaml of ``text`` (dedented) as it is: the loader's input under test."""
    return site_config.write(text=textwrap.dedent(text))


def test_documented_example_loads_and_resolves_partitions():
    cfg = load_site_config(os.path.join(REPO, "site_config", "site.yaml"))
    f = resolve_carbon(cfg, partition="cpu")
    # site.yaml: main-room has PUE 1.35 and 56 gCO2e/kWh, alpha written explicitly as 1.0
    assert (f.datacenter, f.pue, f.ci_g_per_kwh, f.alpha) == ("main-room", 1.35, 56.0, 1.0)
    assert f.defaults_used == []
    assert "RTE eco2mix" in f.ci_source
    g = resolve_carbon(cfg, partition="gpu")
    # gpu-container has no intensity: bundled OWID value for France 2024 = 44.18 gCO2e/kWh
    assert (g.datacenter, g.pue, g.ci_g_per_kwh, g.ci_year) == ("gpu-container", 1.2, 44.18, 2024)
    assert "country FR" in g.ci_source and g.defaults_used == ["alpha"]


@pytest.mark.parametrize("name", ["example-us-regions.yaml", "example-minimal.yaml"])
def test_other_examples_load(name):
    cfg = load_site_config(os.path.join(REPO, "site_config", name))
    assert cfg.source_path.endswith(name)


def test_no_file_gives_documented_defaults_and_says_so(monkeypatch, tmp_path):
    monkeypatch.delenv("SLURM_ENERGY_CONFIG", raising=False)
    monkeypatch.setattr("slurm_energy.config.schema.DEFAULT_PATH", str(tmp_path / "absent.yaml"))
    cfg = load_site_config()
    assert cfg.defaults_used[0] == "config_file"
    assert cfg.sampling.interval_s == 5.0  # s
    assert cfg.hardware.ram_w_per_gb == 0.3725  # W/GB, Green Algorithms
    assert cfg.paths.results_dir == "/var/spool/slurm-energy/results"
    assert cfg.paths.store_url == "sqlite:////var/lib/slurm-energy/jobs.db"  # outside the 0700 spool
    f = resolve_carbon(cfg, partition="any", node="n1", offline=True)
    assert (f.pue, f.ci_g_per_kwh, f.alpha) == (1.58, 475.0, 1.0)
    assert f.ci_source.startswith("DEFAULT: world average 475")
    assert sorted(f.defaults_used) == ["alpha", "ci", "pue"]


def test_env_var_is_used(monkeypatch, tmp_path, site_config):
    p = _write(site_config, "cluster_name: envcl\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(p))
    assert load_site_config().cluster_name == "envcl"


def test_derived_paths_follow_spool(tmp_path):
    cfg = site_config_from_dict({"paths": {"spool_dir": "/srv/se"}})
    assert cfg.paths.results_dir == "/srv/se/results"
    assert cfg.paths.store_url == "sqlite:////var/lib/slurm-energy/jobs.db"  # never under the 0700 spool
    assert cfg.paths.hourly_ci_dir == "/srv/se/carbon-intensity"


@pytest.mark.parametrize("data, path, value, fix", [
    ({"datacenters": {"a": {"pue": 0.8}}}, "datacenters.a.pue", "0.8", "facility energy / IT energy"),
    ({"sampling": {"interval_s": 0}}, "sampling.interval_s", "0", "> 0"),
    ({"datacenters": {"a": {"alpha": 1.5}}}, "datacenters.a.alpha", "1.5", "[0, 1]"),
    ({"attribution": {"policy": "fair"}}, "attribution.policy", "'fair'", "shared"),
    ({"location": {"country": "XX"}}, "location.country", "'XX'", "ISO 3166"),
    ({"location": {"country": "France"}}, "location.country", "'France'", "ISO 3166"),
    ({"timezone": "Paris"}, "timezone", "'Paris'", "IANA"),
    ({"sampling": {"intervall_s": 5}}, "sampling.intervall_s", "5", "spelling"),
    ({"datacenters": {"a": {"carbon_intensity": {"value": 3, "unit": "kgCO2e/kWh"}}}},
     "datacenters.a.carbon_intensity", "3", "2000"),
    ({"datacenters": {"a": {"carbon_intensity": {"value": 300, "unit": "lb/MWh"}}}},
     "datacenters.a.carbon_intensity", "lb/MWh", "gCO2e/kWh"),
])
def test_errors_name_field_value_and_fix(data, path, value, fix):
    with pytest.raises(ConfigError) as ei:
        site_config_from_dict(data)
    msg = str(ei.value)
    assert path in msg and value in msg and fix in msg


def test_bad_yaml_and_missing_file(tmp_path, site_config):
    p = _write(site_config, "datacenters: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_site_config(p)
    with pytest.raises(ConfigError, match="cannot read"):
        load_site_config(tmp_path / "nope.yaml")
    p2 = _write(site_config, "- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_site_config(p2)


def test_partition_in_two_datacenters_rejected():
    with pytest.raises(ConfigError, match="partition 'gpu' is listed in datacenters"):
        site_config_from_dict({"datacenters": {"a": {"partitions": ["gpu"]}, "b": {"partitions": ["gpu"]}}})


def test_unit_conversion_in_config():
    cfg = site_config_from_dict({"datacenters": {"a": {"carbon_intensity": {"value": 0.35, "unit": "kgCO2e/kWh"}}}})
    f = resolve_carbon(cfg)
    # 0.35 kgCO2e/kWh x 1000 g/kg = 350 gCO2e/kWh; catch-all datacenter (no partitions/nodes)
    assert f.ci_g_per_kwh == pytest.approx(350.0)
    assert "given as 0.35 kgCO2e/kWh" in f.ci_source


def test_alpha3_country_normalised_to_alpha2():
    cfg = site_config_from_dict({"location": {"country": "deu"}})
    assert cfg.location.country == "DE"


RESOLVE = {
    "location": {"country": "SE"},
    "pue": 1.3,
    "datacenters": {
        "north": {"pue": 1.1, "alpha": 0.5, "carbon_intensity": {"value": 20}, "source": "contract",
                  "partitions": ["p1"], "nodes": ["n[0-4]*"]},
        "cal": {"location": {"country": "US", "region": "US-CA"}, "nodes": ["cal*"]},
        "nowhere": {"location": {"country": "US", "region": "XX-ZZ"}, "partitions": ["odd"]},
    },
}


def test_resolution_order():
    cfg = site_config_from_dict(RESOLVE)
    by_part = resolve_carbon(cfg, partition="p1", node="cal7")
    assert (by_part.datacenter, by_part.pue, by_part.alpha, by_part.ci_g_per_kwh) == ("north", 1.1, 0.5, 20.0)
    by_node = resolve_carbon(cfg, partition="other", node="cal7")
    # Green Algorithms US-CA = 216.43 gCO2e/kWh; PUE falls back to the site's 1.3
    assert (by_node.datacenter, by_node.ci_g_per_kwh, by_node.pue) == ("cal", 216.43, 1.3)
    assert "region US-CA" in by_node.ci_source and by_node.pue_source == "site config: pue"
    site = resolve_carbon(cfg, partition="other", node="zz1")
    # site country Sweden: owid/derived_latest_by_country.csv row "SE,SWE,Sweden,2024,35.82"
    assert site.datacenter == "" and site.ci_g_per_kwh == pytest.approx(35.82)
    assert "site location country SE" in site.ci_source
    odd = resolve_carbon(cfg, partition="odd")
    # unknown region falls back to the datacenter's own country (US, OWID 2024: 383.55), never another
    assert odd.ci_g_per_kwh == pytest.approx(383.55)
    assert "region 'XX-ZZ' not in bundled table; its country used" in odd.ci_source


def test_pue_is_recorded_once_not_applied():
    f = resolve_carbon(site_config_from_dict({}), offline=True)
    assert f.pue == DEFAULT_PUE and "Uptime" in f.pue_source


def test_cpu_tdp_override_table_and_fallbacks():
    cfg = site_config_from_dict({"hardware": {"cpu_tdp_w": {"Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz": 125}}})
    w, wc, src, fb = cpu_tdp(cfg.hardware, "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz", 16)
    assert (w, wc, fb) == (125.0, 125.0 / 16, False) and "cpu_tdp_w" in src  # 7.8125 W/core
    w, wc, src, fb = cpu_tdp(cfg.hardware, "Intel(R) Xeon(R) CPU E5-2683 v4 @ 2.10GHz", 16)
    assert (w, wc, fb) == (120.0, 7.5, False)  # 120 W / 16 cores = 7.5 W/core (Green Algorithms)
    w, wc, src, fb = cpu_tdp(cfg.hardware, "QEMU Virtual CPU version 2.5+", 2)
    assert (w, wc, fb) == (24.0, 12.0, True)  # 12 W/core x 2 cores = 24 W, flagged
    assert "unknown CPU model" in src
    cfg2 = site_config_from_dict({"hardware": {"cpu_tdp_default_w": 90}})
    assert cpu_tdp(cfg2.hardware, "Mystery CPU", 4)[:2] == (90.0, 22.5)  # 90 W / 4 cores
    with pytest.raises(ValueError, match="cores"):
        cpu_tdp(cfg.hardware, "x", 0)


def test_gpu_rated_override_table_fallback():
    cfg = site_config_from_dict({"hardware": {"gpu": {"L40S": {"rated_w": 350, "bf16_flops": 362e12}}}})
    w, fl, src, fb = gpu_rated(cfg.hardware, "NVIDIA L40S")
    assert (w, fl["bf16"], fb) == (350.0, 362e12, False)
    w, fl, src, fb = gpu_rated(cfg.hardware, "NVIDIA H100 80GB HBM3")
    assert (w, fl["bf16"]) == (700.0, 989.4e12) and "Epoch" in src  # H100 SXM5 datasheet
    w, fl, src, fb = gpu_rated(cfg.hardware, "NVIDIA Mystery 9000")
    assert w is None and fb and src.startswith("unavailable")  # unmeasured stays None, not 0
    cfg2 = site_config_from_dict({"hardware": {"gpu_fallback_w": 250}})
    assert gpu_rated(cfg2.hardware, "NVIDIA Mystery 9000")[0] == 250.0


def test_check_config_cli(tmp_path, site_config, capsys):
    from slurm_energy.cli.main import main

    good = os.path.join(REPO, "site_config", "site.yaml")
    assert main(["check-config", good, "--offline"]) == 0
    out = capsys.readouterr().out
    assert "partition gpu: datacenter=gpu-container" in out and "PUE 1.2" in out and out.rstrip().endswith("OK")
    bad = _write(site_config, "datacenters:\n  a: {pue: 0.9}\n")
    assert main(["check-config", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "datacenters.a.pue: bad value 0.9" in err


@pytest.mark.parametrize(("interval", "warned"), [(0.001, True), (0.5, True), (1.0, False), (5.0, False)])
def test_check_config_warns_of_a_sampling_interval_under_a_second(site_config, capsys, interval, warned):
    """0.001 s loads (> 0) but wakes every node's sampler 1,000 times a second (a tester measured
    0.17 of a core): check-config passes it with a warning naming the field, the rate and the usual range."""
    from slurm_energy.cli.main import main

    p = _write(site_config, f"cluster_name: c\nsampling:\n  interval_s: {interval}\n")
    assert main(["check-config", str(p), "--offline"]) == 0
    err = capsys.readouterr().err
    line = f"warning: {p}: sampling.interval_s: {interval:g} s wakes the node's sampler {1 / interval:,.0f} times a second"
    assert (line in err) is warned and ("1-10 s is usual" in err) is warned


def test_the_resolved_config_is_frozen_in_both_its_forms(tmp_path):
    # issue 29: one resolved config per process, which no part changes under another
    import pydantic

    from slurm_energy.config import site_config_from_dict
    from slurm_energy.slurm.config_cache import ConfigView

    cfg = site_config_from_dict({"pue": 1.3, "paths": {"spool_dir": str(tmp_path / "spool")}})
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        cfg.pue = 2.0
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        cfg.paths.store_url = "sqlite:////elsewhere.db"
    other = cfg.model_copy(update={"pue": 2.0})  # a changed copy is a new one
    assert (cfg.pue, other.pue) == (1.3, 2.0)
    view = ConfigView(cfg.model_dump(mode="json"))  # the hooks' form of it
    assert view.paths.spool_dir == str(tmp_path / "spool") and view.pue == 1.3
    for change in (lambda: view.__setitem__("pue", 2.0), lambda: setattr(view, "pue", 2.0),
                   lambda: view.paths.update(spool_dir="/tmp"), lambda: view.pop("pue"), view.clear):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert view.pue == 1.3 and view.paths.spool_dir == str(tmp_path / "spool")


@pytest.mark.parametrize(("yaml_text", "path", "near"), [
    ("cluster_name: x\nsamplng:\n  interval_s: 5\n", "samplng", "sampling"),
    ("datacenters:\n  main:\n    pue: 1.2\n    locaton: {country: FR}\n", "datacenters.main.locaton", "location"),
    ("sampling:\n  intervall_s: 5\n", "sampling.intervall_s", "interval_s"),
    ("cluster_name: x\nzzz_unrelated: 1\n", "zzz_unrelated", None),
], ids=["top level", "under a datacenter's name", "nested", "nothing near"])
def test_an_unknown_key_names_the_nearest_allowed_one_and_the_installed_example(tmp_path, yaml_text, path, near):
    """A misspelt key gets its sibling that it is closest to (not any key of the schema), and the
    example it points at is a file that exists in this installation (a .deb or pip user has no
    checkout's site_config/)."""
    from slurm_energy.config.load import documented_example

    p = tmp_path / "site.yaml"
    p.write_text(yaml_text)
    with pytest.raises(ConfigError) as e:
        load_site_config(str(p))
    (line,) = [x for x in str(e.value).splitlines() if f": {path}: " in x]
    assert ("did you mean" not in line) if near is None else (f"did you mean {near!r}?" in line)
    assert f"documented keys: {documented_example()})" in line and os.path.isfile(documented_example())


def test_a_country_given_as_an_argument_is_labelled_given_not_a_datacenter():
    """``run --country FR`` / ``track(country="FR")`` with no site datacenter: the intensity's label
    says the place was given (a tester found "datacenter given location" for a datacenter that
    does not exist); a site's own datacenter keeps its name."""
    from slurm_energy.carbon.tables import lookup_country
    from slurm_energy.config.overrides import with_carbon_overrides

    site = with_carbon_overrides(site_config_from_dict({"cluster_name": "c"}), country="FR", given_by="slurm-energy run")
    f = resolve_carbon(site, partition="", node="n1", offline=True)
    assert f.ci_source.startswith("given location country FR: ") and "datacenter" not in f.ci_source
    assert f.ci_g_per_kwh == lookup_country("FR").g_per_kwh  # gCO2e/kWh, the bundled table's
    own = site_config_from_dict({"datacenters": {"main": {"location": {"country": "FR"}}}})
    assert resolve_carbon(own, partition="", node="n1", offline=True).ci_source.startswith(
        "datacenter main location country FR: ")
