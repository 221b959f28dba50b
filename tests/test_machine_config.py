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
    ("[cpu]\nfma_units = 0\nfma_width_bits = 256\n",
     r"fma_units = 0: out of range: must be a whole number from 1 to 16$"),
    ("[cpu]\nfma_units = 2\nfma_width_bits = 100\n", r"multiple of 64"),
    ("[cpu]\nfma_units = 2\n", r"go together"),
    ("[cpu]\nbase_ghz = true\n", r"must be a number"),
    ("[peaks]\nflops_dp_node_gflops = -1\n", r"= -1: out of range: must be a number from 0.001 to 1e\+09 Gflop/s$"),
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


# -- ranges: finite, above zero, and what a real machine can have --------------------------------

def _one(section: str, key: str, value: str) -> str:
    extra = "fma_width_bits = 256\n" if key == "fma_units" else "fma_units = 2\n" if key == "fma_width_bits" else ""
    return f"[{section}]\n{key} = {value}\n{extra}"


NUMERIC = [(section, key, k) for section, keys in config.SCHEMA.items() for key, k in keys.items()
           if k.low is not None]


@pytest.mark.parametrize("section,key,k", NUMERIC, ids=[f"{s}.{k}" for s, k, _ in NUMERIC])
def test_every_numeric_key_accepts_its_range_and_refuses_beyond_it(section, key, k):
    fmt = (lambda v: str(int(v))) if k.types is int else repr
    for inside in (k.low, k.high):
        if key == "fma_width_bits":
            inside = 64 * round(inside / 64)
        c = config.parse(_one(section, key, fmt(inside)), "c.toml")
        assert c.get(section, key) == inside
    outside = [k.low - 1 if k.types is int else k.low / 2, k.high * 2, 0, -1]
    if k.types is not int:
        outside += ["inf", "-inf", "nan", "1e-320", "1e308"]
    else:
        outside += ["1" + "0" * 400]
    for v in outside:
        text = _one(section, key, v if isinstance(v, str) else fmt(v))
        with pytest.raises(ConfigError) as e:
            config.parse(text, "c.toml")
        msg = str(e.value)
        assert msg.startswith(f"config file c.toml: [{section}] {key} = ") and "\n" not in msg, msg
        what = "a whole number" if k.types is int else "a number"
        assert f"out of range: must be {what} from {k.low:g} to {k.high:g}" in msg
        assert e.value.exit_code == 6
    with pytest.raises(ConfigError, match="must be (a number|an integer)$"):
        config.parse(_one(section, key, "true"), "c.toml")        # a bool is no number


def test_the_values_of_the_report_are_refused_with_the_range():
    for value in ("inf", "nan", "1e-320"):
        with pytest.raises(ConfigError, match=rf"\[peaks\] flops_dp_node_gflops = {value}: out of range: must be "
                                              r"a number from 0.001 to 1e\+09 Gflop/s$"):
            config.parse(f"[peaks]\nflops_dp_node_gflops = {value}\n", "c.toml")
    with pytest.raises(ConfigError, match=r"\[memory\] channels = \(an integer of 401 digits\): out of range"):
        config.parse("[memory]\nchannels = 1" + "0" * 400 + "\n", "c.toml")
    with pytest.raises(ConfigError, match=r"\[memory\] mts = 3200000000: out of range: .* to 100000 MT/s$"):
        config.parse("[memory]\nmts = 3200000000\n", "c.toml")     # Hz, not MT/s


def test_an_integer_python_cannot_read_is_one_line():
    with pytest.raises(ConfigError, match=r"^config file c.toml: cannot be read: an integer of over 4300 digits$"):
        config.parse("[memory]\nchannels = 1" + "0" * 5000 + "\n", "c.toml")


def test_a_float_key_takes_an_integer():
    assert config.parse("[peaks]\nmembw_node_gbs = 400\n", "c.toml").get("peaks", "membw_node_gbs") == 400.0
