"""The user's config file: lookup order, validation errors, and what it overrides."""
import pytest

from ceiling.errors import ConfigError
from ceiling.machine import config, detect
from machine_fixtures import fsroot, local


def cfg(name):
    return local("config", name)


@pytest.mark.parametrize("name,pattern", [
    ("unknown-key.toml", r"unknown-key\.toml: \[cpu\] fma_unit: unknown key"),
    ("wrong-type.toml", r"wrong-type\.toml: \[memory\] mts = 'fast': must be an integer"),
    ("bad.toml", r"bad\.toml: bad TOML: .*line 4"),
])
def test_bad_files_raise_one_clear_line(name, pattern):
    with pytest.raises(ConfigError, match=pattern) as e:
        config.load(cfg(name))
    assert "\n" not in str(e.value) and e.value.exit_code == 6


@pytest.mark.parametrize("text,pattern", [
    ("[gpu]\nx = 1\n", r"unknown section \[gpu\]"),
    ("x = 1\n", r"x: unknown key outside a section"),
    ("[cpu]\nfma_units = 0\nfma_width_bits = 256\n", r"fma_units = 0: must be > 0"),
    ("[cpu]\nfma_units = 2\nfma_width_bits = 100\n", r"multiple of 64"),
    ("[cpu]\nfma_units = 2\n", r"go together"),
    ("[cpu]\nbase_ghz = true\n", r"must be a number"),
    ("[peaks]\nflops_dp_node_gflops = -1\n", r"must be > 0"),
])
def test_checks(text, pattern):
    with pytest.raises(ConfigError, match=pattern):
        config.parse(text, "c.toml")


def test_lookup_order(tmp_path, monkeypatch):
    monkeypatch.delenv("CEILING_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config.load() is None                                   # nothing there: no config
    default = tmp_path / "xdg" / "ceiling" / "config.toml"
    default.parent.mkdir(parents=True)
    default.write_text("[memory]\nmts = 3200\n")
    assert config.load().get("memory", "mts") == 3200
    other = tmp_path / "other.toml"
    other.write_text("[memory]\nmts = 4800\n")
    monkeypatch.setenv("CEILING_CONFIG", str(other))
    assert config.load().get("memory", "mts") == 4800              # the environment beats the default
    assert config.load(cfg("good.toml")).get("memory", "mts") == 2933   # an explicit path beats both
    monkeypatch.setenv("CEILING_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="not found"):
        config.load()
    with pytest.raises(ConfigError, match="not found"):
        config.load(tmp_path / "nope.toml")


def test_overrides_reach_the_peaks_with_provenance(tmp_path_factory):
    """2 x Gold 6230: 40 cores x 2.8 GHz x 32 DP flop/cycle; 12 channels x 2933 MT/s x 8 B."""
    c = config.load(cfg("good.toml"))
    m = detect(fsroot("memorysidecaches", tmp_path_factory), measure=False, config=c)
    prov = f"config file {cfg('good.toml')}"
    assert m.microarch == "Cascade Lake (tuned)" and m.sources["microarch"] == prov
    assert m.sources["fma_units"] == prov and m.fma_units_by_bits == {256: 2, 512: 2}
    dp = m.peaks["flops.dp.node"]
    assert dp.value == pytest.approx(40 * 2.8 * 32)
    assert "40 cores × 2.80 GHz" in dp.provenance and prov in dp.provenance and "32 DP flop/cycle" in dp.provenance
    assert m.peaks["flops.sp.core"].value == pytest.approx(2.8 * 64)
    bw = m.peaks["membw.node"]
    assert bw.value == pytest.approx(12 * 2933 * 8 / 1000)
    assert prov in bw.provenance and "2933 MT/s" in bw.provenance
    assert m.peaks["membw.domain"].value == pytest.approx(bw.value / 4)      # SNC: 4 domains, 3 channels each
    assert m.config["path"] == str(cfg("good.toml"))


def test_peak_overrides_replace_computed_values(tmp_path_factory):
    c = config.load(cfg("peaks.toml"))
    m = detect(fsroot("memorysidecaches", tmp_path_factory), measure=False, config=c)
    assert m.peaks["flops.dp.node"].value == 3000 and "flops_dp_node_gflops" in m.peaks["flops.dp.node"].provenance
    assert m.peaks["membw.node"].value == 250.5
    assert not m.peaks["flops.sp.node"].known                      # not overridden, clock unknown here


def test_fixture_roots_ignore_the_users_default_config(tmp_path, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("CEILING_CONFIG", str(cfg("peaks.toml")))
    m = detect(fsroot("memorysidecaches", tmp_path_factory), measure=False)
    assert m.config == {} and not m.peaks["flops.dp.node"].known
