"""ras.edac, ras.rasdaemon and ras.mcelog on fake trees.

EDAC trees follow Documentation/admin-guide/ras.rst ("EDAC" sysfs):
/sys/devices/system/edac/mc/mcN/{mc_name, size_mb, seconds_since_reset,
ce_count, ce_noinfo_count, ue_count, ue_noinfo_count} with dimmM/ (or
rankM/) {dimm_label, dimm_location, dimm_ce_count, dimm_ue_count, size}; the
old layout has csrowK/{ce_count, ue_count, size_mb, chJ_ce_count,
chJ_dimm_label}. The rasdaemon database uses the tables rasdaemon's
ras-record.c creates (mc_event, mce_record, aer_event). The mcelog log is
mcelog's text format (a disclaimer line, "MCE n", then the decoded record).
"""
import os
import sqlite3
from pathlib import Path

import pytest


from ceiling.checks import base, ras
from ceiling.machine.model import Cpu, Machine
from checkutil import write

MC = "sys/devices/system/edac/mc"


def machine(**kw) -> Machine:
    cpus = [Cpu(id=i, core=i % 4, socket=(i % 4) // 2, node=(i % 4) // 2, smt=i // 4) for i in range(8)]
    return Machine(arch="x86_64", sockets=2, cores=4, threads=8, cpus=cpus, **kw)


def run(check_id, root, m=None):
    return base.run_one(base.REGISTRY[check_id], base.Probe.of(m or machine(), str(root)), strict=True)


# ---- EDAC --------------------------------------------------------------------------

def skx_edac(root: Path, errors=None) -> Path:
    """2-socket Intel Xeon (skx_edac): 2 memory controllers per socket, 3 channels each,
    one DIMM per channel, labels as skx_edac names them. errors: {(mc, dimm): (ce, ue)}."""
    errors = errors or {}
    for mc in range(4):
        d = f"{MC}/mc{mc}"
        write(root, f"{d}/mc_name", f"Skylake Socket#{mc // 2} IMC#{mc % 2}\n")
        write(root, f"{d}/size_mb", "98304\n")
        write(root, f"{d}/seconds_since_reset", "1209600\n")      # 14 days
        ce = sum(v[0] for k, v in errors.items() if k[0] == mc)
        ue = sum(v[1] for k, v in errors.items() if k[0] == mc)
        for name, v in (("ce_count", ce), ("ue_count", ue), ("ce_noinfo_count", 0), ("ue_noinfo_count", 0)):
            write(root, f"{d}/{name}", f"{v}\n")
        for dimm in range(3):
            dd = f"{d}/dimm{dimm}"
            write(root, f"{dd}/dimm_label", f"CPU_SrcID#{mc // 2}_MC#{mc % 2}_Chan#{dimm}_DIMM#0\n")
            write(root, f"{dd}/dimm_location", f"channel {dimm} slot 0 \n")
            write(root, f"{dd}/size", "32768\n")
            c, u = errors.get((mc, dimm), (0, 0))
            write(root, f"{dd}/dimm_ce_count", f"{c}\n")
            write(root, f"{dd}/dimm_ue_count", f"{u}\n")
    return root


def test_edac_healthy_lists_the_controllers(tmp_path):
    f = run("ras.edac", skx_edac(tmp_path))
    assert f.status == "ok" and f.title == "No memory errors on 4 memory controllers (EDAC)"
    assert "mc0 (Skylake Socket#0 IMC#0): 0 CE, 0 UE" in f.evidence and "mc3 (Skylake Socket#1 IMC#1)" in f.evidence
    assert "counted over 14 d 0 h" in f.evidence


def test_edac_corrected_errors_name_the_dimm(tmp_path):
    f = run("ras.edac", skx_edac(tmp_path, {(1, 2): (12, 0), (2, 0): (3, 0)}))
    assert f.status == "warn" and f.title == "Corrected memory errors: 15"
    assert "CPU_SrcID#0_MC#1_Chan#2_DIMM#0 (channel 2 slot 0, mc1/dimm2): 12 CE" in f.evidence
    assert "CPU_SrcID#1_MC#0_Chan#0_DIMM#0 (channel 0 slot 0, mc2/dimm0): 3 CE" in f.evidence
    assert "mc1 (Skylake Socket#0 IMC#1): 12 CE, 0 UE" in f.evidence
    assert f.data["cause"] == "corrected_errors" and "at the next maintenance" in f.fix


def test_edac_uncorrected_errors_fail(tmp_path):
    root = skx_edac(tmp_path, {(3, 1): (40, 2)})
    write(root, f"{MC}/mc3/ue_noinfo_count", "1\n")
    f = run("ras.edac", root)
    assert f.status == "fail" and f.title == "Uncorrected memory errors: 2 (and 40 corrected)"
    assert "mc3/dimm1): 2 UE, 40 CE" in f.evidence and "mc3 ue_noinfo_count=1" in f.evidence
    assert "replace the DIMM" in f.fix
    assert f.data["cause"] == "uncorrected_errors" and "drain the node" in f.fix


def test_edac_old_csrow_layout(tmp_path):
    """amd64_edac on an old kernel: csrows with per-channel CE counts and labels."""
    for row in range(2):
        d = f"{MC}/mc0/csrow{row}"
        write(tmp_path, f"{d}/size_mb", "8192\n")
        write(tmp_path, f"{d}/ue_count", "0\n")
        write(tmp_path, f"{d}/ce_count", "5\n" if row == 1 else "0\n")
        for ch in range(2):
            write(tmp_path, f"{d}/ch{ch}_dimm_label", f"DIMM_{'AB'[ch]}{row + 1}\n")
            write(tmp_path, f"{d}/ch{ch}_ce_count", "5\n" if (row, ch) == (1, 1) else "0\n")
    write(tmp_path, f"{MC}/mc0/mc_name", "F10h\n")
    f = run("ras.edac", tmp_path)
    assert f.status == "warn" and f.title == "Corrected memory errors: 5"
    assert "DIMM_B2 (csrow1 channel 1, mc0/csrow1/ch1): 5 CE" in f.evidence
    assert "mc0 (F10h): 5 CE, 0 UE" in f.evidence and "counted since the driver was loaded" in f.evidence


def test_edac_dimm_counts_when_the_controller_totals_are_missing(tmp_path):
    root = skx_edac(tmp_path, {(0, 1): (7, 0)})
    for mc in range(4):
        (root / MC / f"mc{mc}" / "ce_count").unlink()
        (root / MC / f"mc{mc}" / "ue_count").write_text("garbage\n")
    f = run("ras.edac", root)
    assert f.status == "warn" and f.title == "Corrected memory errors: 7"


@pytest.mark.parametrize("make,says", [
    (lambda r: None, "is absent"),                                   # a VM or container: no EDAC at all
    (lambda r: (r / MC).mkdir(parents=True), "has no mc* directories"),  # edac_core loaded, no driver
])
def test_edac_absent_is_skipped(tmp_path, make, says):
    make(tmp_path)
    f = run("ras.edac", tmp_path)
    assert f.status == "skipped" and "no EDAC driver" in f.title and says in f.evidence


def test_edac_unreadable_counters_are_skipped(tmp_path):
    write(tmp_path, f"{MC}/mc0/ce_count", "x\n")
    write(tmp_path, f"{MC}/mc0/ue_count", "\n")
    f = run("ras.edac", tmp_path)
    assert f.status == "skipped" and "not readable" in f.title


# ---- rasdaemon -----------------------------------------------------------------------

# The tables as rasdaemon's ras-record.c creates them (SQLite types of DB_TYPE_*).
SCHEMA = """
CREATE TABLE mc_event (id INTEGER PRIMARY KEY, timestamp TEXT, err_count INTEGER, err_type TEXT, err_msg TEXT,
    label TEXT, mc INTEGER, top_layer INTEGER, middle_layer INTEGER, lower_layer INTEGER, address INTEGER,
    grain INTEGER, syndrome INTEGER, driver_detail TEXT);
CREATE TABLE aer_event (id INTEGER PRIMARY KEY, timestamp TEXT, dev_name TEXT, err_type TEXT, err_msg TEXT);
CREATE TABLE mce_record (id INTEGER PRIMARY KEY, timestamp TEXT, mcgcap INTEGER, mcgstatus INTEGER,
    status INTEGER, addr INTEGER, misc INTEGER, ip INTEGER, tsc INTEGER, walltime INTEGER, ppin INTEGER,
    cpu INTEGER, cpuid INTEGER, apicid INTEGER, socketid INTEGER, cs INTEGER, bank INTEGER, cpuvendor INTEGER,
    microcode INTEGER, bank_name TEXT, error_msg TEXT, mcgstatus_msg TEXT, mcistatus_msg TEXT,
    mcastatus_msg TEXT, user_action TEXT, mc_location TEXT);
"""
DB = "var/lib/rasdaemon/ras-mc_ctx.db"


def int64(u: int) -> int:
    """rasdaemon binds the 64-bit MCi_STATUS with sqlite3_bind_int64: stored signed."""
    return u - (1 << 64) if u >= 1 << 63 else u


def rasdb(root: Path, mc=(), aer=(), mce=()) -> Path:
    path = root / DB
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    for ts, count, typ, msg, label in mc:
        con.execute("INSERT INTO mc_event (timestamp, err_count, err_type, err_msg, label, mc, top_layer, "
                    "middle_layer, lower_layer, address, grain, syndrome, driver_detail) "
                    "VALUES (?, ?, ?, ?, ?, 0, 1, 2, -1, 0x1f6e3a000, 32, 0, '')", (ts, count, typ, msg, label))
    for ts, dev, typ, msg in aer:
        con.execute("INSERT INTO aer_event (timestamp, dev_name, err_type, err_msg) VALUES (?, ?, ?, ?)",
                    (ts, dev, typ, msg))
    for ts, status, bank, bank_name, msg, mci in mce:
        con.execute("INSERT INTO mce_record (timestamp, mcgcap, mcgstatus, status, addr, misc, ip, tsc, walltime, "
                    "ppin, cpu, cpuid, apicid, socketid, cs, bank, cpuvendor, microcode, bank_name, error_msg, "
                    "mcgstatus_msg, mcistatus_msg, mcastatus_msg, user_action, mc_location) VALUES "
                    "(?, 0x1000c14, 0, ?, 0, 0, 0, 0, 1700000000, 0, 3, 0x50654, 6, 0, 0, ?, 0, 0x2006e05, ?, ?, "
                    "'', ?, '', '', '')", (ts, int64(status), bank, bank_name, msg, mci))
    con.commit()
    con.close()
    return root


def test_rasdaemon_empty_database_is_ok(tmp_path):
    f = run("ras.rasdaemon", rasdb(tmp_path))
    assert f.status == "ok" and "mc_event: none" in f.evidence and "mce_record: none" in f.evidence


def test_rasdaemon_corrected_memory_errors_warn(tmp_path):
    root = rasdb(tmp_path, mc=[
        ("2024-03-01 10:00:00 +0000", 1, "Corrected", "memory read error", "CPU_SrcID#0_MC#0_Chan#1_DIMM#0"),
        ("2024-03-04 08:30:00 +0000", 4, "Corrected", "memory read error", "CPU_SrcID#1_MC#1_Chan#0_DIMM#0")])
    f = run("ras.rasdaemon", root)
    assert f.status == "warn" and f.title == "rasdaemon recorded 2 corrected error events"
    assert "mc_event: 2 corrected (5 errors)" in f.evidence
    assert f.evidence.index("2024-03-04 08:30:00 +0000 mc_event Corrected ×4 on CPU_SrcID#1_MC#1_Chan#0_DIMM#0") \
        < f.evidence.index("2024-03-01")


def test_rasdaemon_uncorrected_machine_check_fails(tmp_path):
    root = rasdb(tmp_path, mce=[
        # VAL|EN|MISCV|ADDRV, corrected memory read error on bank 7.
        ("2024-02-01 12:00:00 +0000", 0x8C00004000010090, 7, "Intel IMC", "MEMORY CONTROLLER RD_CHANNEL0_ERR",
         "Corrected_error"),
        # VAL|UC|EN|MISCV|ADDRV|PCC: uncorrected.
        ("2024-02-02 12:00:00 +0000", 0xBE00000000800400, 4, "Intel PCU", "Internal unclassified error",
         "Uncorrected_error Processor_context_corrupt")])
    f = run("ras.rasdaemon", root)
    assert f.status == "fail" and f.title == "rasdaemon recorded 1 uncorrected error event (and 1 corrected)"
    assert "mce_record: 1 uncorrected, 1 corrected" in f.evidence
    assert "mce_record uncorrected bank 4 (Intel PCU) CPU 3: Internal unclassified error" in f.evidence


def test_rasdaemon_mce_counts_every_row_and_shows_the_last(tmp_path):
    corrected = ("2024-02-01 12:00:00 +0000", 0x8C00004000010090, 7, "Intel IMC", "MEMORY CONTROLLER RD_CHANNEL0_ERR",
                 "Corrected_error")
    last = ("2024-02-03 12:00:00 +0000", 0x8C00004000010090, 5, "Intel IMC", "last one", "Corrected_error")
    root = rasdb(tmp_path, mce=[corrected] * 300 + [last])
    path = root / DB
    con = sqlite3.connect(path)
    # Rows without an integer MCi_STATUS are classed by their words.
    con.executemany("INSERT INTO mce_record (timestamp, status, error_msg, mcistatus_msg) VALUES (?, ?, ?, ?)",
                    [("2024-01-01 00:00:00 +0000", None, "x", "Uncorrected_error"),
                     ("2024-01-01 00:00:00 +0000", "junk", "Corrected error", None),
                     ("2024-01-01 00:00:00 +0000", None, None, None)])
    con.commit()
    con.close()
    f = run("ras.rasdaemon", root)
    assert f.status == "fail" and "mce_record: 1 uncorrected, 302 corrected, 1 other" in f.evidence
    con = sqlite3.connect(path)
    con.execute("DELETE FROM mce_record WHERE typeof(status) != 'integer'")
    con.commit()
    con.close()
    f = run("ras.rasdaemon", root)
    assert f.status == "warn" and "mce_record: 301 corrected" in f.evidence
    assert "mce_record corrected bank 5 (Intel IMC) CPU 3: last one" in f.evidence


@pytest.mark.parametrize("typ,status", [("Uncorrected (Non-Fatal)", "fail"), ("Uncorrected (Fatal)", "fail"),
                                        ("Corrected", "warn")])
def test_rasdaemon_pcie_aer(tmp_path, typ, status):
    root = rasdb(tmp_path, aer=[("2024-01-05 01:02:03 +0000", "0000:3b:00.0", typ, "Receiver Error")])
    f = run("ras.rasdaemon", root)
    assert f.status == status and "aer_event: 1 " in f.evidence
    assert "aer_event " + typ + " on 0000:3b:00.0: Receiver Error" in f.evidence


def test_rasdaemon_deferred_counts_as_uncorrected(tmp_path):
    root = rasdb(tmp_path, mc=[("2024-03-01 10:00:00 +0000", 1, "Deferred", "", "")])
    assert run("ras.rasdaemon", root).status == "fail"


def test_rasdaemon_absent(tmp_path):
    f = run("ras.rasdaemon", tmp_path)
    assert f.status == "skipped" and "is absent" in f.evidence


def test_rasdaemon_corrupt_database(tmp_path):
    path = tmp_path / DB
    path.parent.mkdir(parents=True)
    path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 8)
    f = run("ras.rasdaemon", tmp_path)
    assert f.status == "skipped" and "could not be read" in f.title and "DatabaseError" in f.evidence


def test_rasdaemon_not_a_rasdaemon_database(tmp_path):
    path = tmp_path / DB
    path.parent.mkdir(parents=True)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE other (x)")
    con.commit()
    con.close()
    f = run("ras.rasdaemon", tmp_path)
    assert f.status == "skipped" and "no mc_event, mce_record or aer_event" in f.evidence


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_rasdaemon_unreadable(tmp_path):
    root = rasdb(tmp_path)
    (root / DB).chmod(0)
    try:
        f = run("ras.rasdaemon", root)
    finally:
        (root / DB).chmod(0o644)
    assert f.status == "skipped" and "permission denied" in f.evidence


def test_rasdaemon_database_in_wal_mode_without_write_access(tmp_path, monkeypatch):
    """A WAL database opened read-only by a user who cannot create its -shm file
    fails with "attempt to write a readonly database"; it opens as immutable."""
    root = rasdb(tmp_path, mc=[("2024-03-01 10:00:00 +0000", 1, "Corrected", "", "DIMM_A1")])
    con = sqlite3.connect(root / DB)
    con.execute("PRAGMA journal_mode=WAL")
    con.close()
    real = sqlite3.connect
    tried = []

    def connect(database, *a, **kw):
        tried.append(database)
        if "immutable=1" not in database:
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real(database, *a, **kw)
    monkeypatch.setattr(ras.sqlite3, "connect", connect)
    f = run("ras.rasdaemon", root)
    assert f.status == "warn" and "mc_event: 1 corrected" in f.evidence
    assert tried[0].endswith("?mode=ro") and tried[1].endswith("?mode=ro&immutable=1")


# ---- mcelog ------------------------------------------------------------------------

CORRECTED = """Hardware event. This is not a software error.
MCE 0
CPU 2 BANK 8 
MISC 140080c86 ADDR 7b45a2000 
TIME 1447866012 Wed Nov 18 18:00:12 2015
MCG status:
MCi status:
Corrected error
MCi_MISC register valid
MCi_ADDR register valid
MCA: MEMORY CONTROLLER RD_CHANNEL0_ERR
Transaction: Memory read error
STATUS 8c00004000010090 MCGSTATUS 0
MCGCAP 1000c14 APICID 4 SOCKETID 0 
CPUID Vendor Intel Family 6 Model 63
"""
UNCORRECTED = """Hardware event. This is not a software error.
MCE 0
CPU 5 BANK 4 
TIME 1447969000 Thu Nov 19 22:36:40 2015
MCG status:RIPV MCIP 
MCi status:
Uncorrected error
Error enabled
Processor context corrupt
MCA: Internal unclassified error
STATUS be00000000800400 MCGSTATUS 5
MCGCAP 1000c14 APICID 10 SOCKETID 1 
CPUID Vendor Intel Family 6 Model 63
"""


def test_mcelog_corrected_records_warn(tmp_path):
    later = CORRECTED.replace("1447866012 Wed Nov 18 18:00:12", "1447900000 Thu Nov 19 03:26:40")
    write(tmp_path, "var/log/mcelog", CORRECTED + later)
    f = run("ras.mcelog", tmp_path)
    assert f.status == "warn" and f.title == "mcelog logged 2 machine-check events"
    assert "2 records (0 uncorrected)" in f.evidence
    assert "TIME 1447900000 Thu Nov 19 03:26:40 2015" in f.evidence
    assert "MEMORY CONTROLLER RD_CHANNEL0_ERR" in f.evidence


def test_mcelog_uncorrected_record_fails(tmp_path):
    write(tmp_path, "var/log/mcelog", CORRECTED + UNCORRECTED)
    f = run("ras.mcelog", tmp_path)
    assert f.status == "fail" and f.title == "mcelog logged 1 uncorrected machine-check event (2 in all)"
    assert "CPU 5 BANK 4" in f.evidence


def test_mcelog_old_format(tmp_path):
    old = CORRECTED.replace("Hardware event. This is not a software error.",
                            "HARDWARE ERROR. This is *NOT* a software problem!\nPlease contact your hardware vendor")
    write(tmp_path, "var/log/mcelog", old * 3)
    f = run("ras.mcelog", tmp_path)
    assert f.status == "warn" and "3 machine-check events" in f.title


def test_mcelog_empty_log_is_ok(tmp_path):
    write(tmp_path, "var/log/mcelog", "")
    f = run("ras.mcelog", tmp_path)
    assert f.status == "ok" and "is empty" in f.evidence


def test_mcelog_absent_and_binary(tmp_path):
    assert run("ras.mcelog", tmp_path).status == "skipped"
    (tmp_path / "var/log").mkdir(parents=True)
    (tmp_path / "var/log/mcelog").write_bytes(b"\xff\xfe\x00binary")
    f = run("ras.mcelog", tmp_path)
    assert f.status == "skipped" and "not readable" in f.title


# ---- garbage in, never a traceback -------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies
SETTINGS = dict(max_examples=60, deadline=None,
                suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
blob = st.one_of(st.binary(max_size=60), st.text(max_size=60))


def _put(path: Path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)


@hypothesis.settings(**SETTINGS)
@hypothesis.given(name=st.sampled_from(["ce_count", "ue_count", "mc_name", "seconds_since_reset", "ce_noinfo_count",
                                        "dimm1/dimm_ce_count", "dimm1/dimm_ue_count", "dimm1/dimm_label",
                                        "dimm1/dimm_location"]), content=blob)
def test_edac_random_contents(tmp_path_factory, name, content):
    root = skx_edac(tmp_path_factory.mktemp("edac"), {(0, 1): (1, 0)})
    _put(root / MC / "mc0" / name, content)
    assert run("ras.edac", root).status in ("ok", "warn", "fail", "skipped")


value = st.one_of(st.none(), st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1), st.text(max_size=20),
                  st.floats(allow_nan=True), st.binary(max_size=10))


@hypothesis.settings(**SETTINGS)
@hypothesis.given(mc=st.lists(st.tuples(value, value, value, value, value), max_size=3),
                  aer=st.lists(st.tuples(value, value, value, value), max_size=2),
                  mce=st.lists(st.tuples(value, value, value, value, value, value), max_size=3))
def test_rasdaemon_random_rows(tmp_path_factory, mc, aer, mce):
    root = tmp_path_factory.mktemp("ras")
    path = root / DB
    path.parent.mkdir(parents=True)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO mc_event (timestamp, err_count, err_type, err_msg, label) VALUES (?, ?, ?, ?, ?)", mc)
    con.executemany("INSERT INTO aer_event (timestamp, dev_name, err_type, err_msg) VALUES (?, ?, ?, ?)", aer)
    con.executemany("INSERT INTO mce_record (timestamp, status, bank, bank_name, error_msg, mcistatus_msg) "
                    "VALUES (?, ?, ?, ?, ?, ?)", mce)
    con.commit()
    con.close()
    assert run("ras.rasdaemon", root).status in ("ok", "warn", "fail", "skipped")


@hypothesis.settings(**SETTINGS)
@hypothesis.given(content=st.one_of(st.binary(max_size=300), st.text(max_size=300)),
                  cut=st.integers(min_value=0, max_value=len(UNCORRECTED)))
def test_random_database_and_log_files(tmp_path_factory, content, cut):
    root = tmp_path_factory.mktemp("raw")
    _put(root / DB, content)
    _put(root / "var/log/mcelog", CORRECTED + UNCORRECTED[:cut] + (content if isinstance(content, str) else ""))
    for cid in ("ras.rasdaemon", "ras.mcelog"):
        assert run(cid, root).status in ("ok", "warn", "fail", "skipped")
