"""probes/node_sampler.py: rates from two reads of a recorded /proc, counter wraps and resets, devices
that come and go, PSI absent; and reads of this node's real /proc."""
import time

import pytest

from ceiling.probes import node_sampler as ns

STAT = "cpu  {u} 0 {s} {i} {w} 0 0 {st} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
MEM = "MemTotal:       16000000 kB\nMemFree:  1000 kB\nMemAvailable:   12000000 kB\nCached:  2000 kB\nDirty: 4 kB\n"
NET = ("Inter-|   Receive   |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes\n"
       "  eth0: {rx} 10 0 0 0 0 0 0 {tx} 20 0 0 0 0 0 0\n")


def disk(name, rd_ios, rd_sect, wr_ios, wr_sect, ticks):
    return f"   8       0 {name} {rd_ios} 0 {rd_sect} 0 {wr_ios} 0 {wr_sect} 0 0 {ticks} 0 0 0 0 0 0\n"


def write(root, u=0, s=0, i=0, w=0, st=0, disks="", rx=0, tx=0, psi=None, whole=("sda",)):
    proc = root / "proc"
    (proc / "net").mkdir(parents=True, exist_ok=True)
    (root / "sys" / "block").mkdir(parents=True, exist_ok=True)
    for d in whole:
        (root / "sys" / "block" / d).mkdir(exist_ok=True)
    (proc / "stat").write_text(STAT.format(u=u, s=s, i=i, w=w, st=st))
    (proc / "meminfo").write_text(MEM)
    (proc / "diskstats").write_text(disks)
    (proc / "net" / "dev").write_text(NET.format(rx=rx, tx=tx))
    (proc / "loadavg").write_text("1.50 0.75 0.25 2/300 4000\n")
    if psi is not None:
        (proc / "pressure").mkdir(exist_ok=True)
        (proc / "pressure" / "io").write_text(f"some avg10=0 avg60=0 avg300=0 total={psi}\n"
                                              f"full avg10=0 avg60=0 avg300=0 total={psi // 2}\n")


def two(tmp_path, first, second, dt=10.0):
    s = ns.NodeSampler(str(tmp_path))
    write(tmp_path, **first)
    a = s.read()
    write(tmp_path, **second)
    b = s.read()
    b.t = a.t + dt
    return s, ns.rates(a, b)


def test_cpu_memory_disk_network_psi_load(tmp_path):
    d0 = disk("sda", 0, 0, 0, 0, 0) + disk("sda1", 0, 0, 0, 0, 0) + disk("loop0", 0, 0, 0, 0, 0)
    d1 = disk("sda", 100, 2048, 50, 4096, 5000) + disk("sda1", 100, 2048, 50, 4096, 5000) + disk("loop0", 9, 9, 9, 9, 9)
    s, r = two(tmp_path, dict(disks=d0, psi=0), dict(u=600, s=200, i=1000, w=150, st=50, disks=d1, rx=10_000,
                                                     tx=20_000, psi=2_000_000))
    assert r["cpu.user"] == 0.3 and r["cpu.system"] == 0.1 and r["cpu.iowait"] == 0.075 and r["cpu.steal"] == 0.025
    assert r["mem.total"] == 16000000 * 1024 and r["mem.used"] == 4000000 * 1024
    assert r["disk.sda.read_Bps"] == 2048 * 512 / 10 and r["disk.sda.write_iops"] == 5.0
    assert r["disk.sda.busy"] == 0.5
    assert not any(k.startswith(("disk.sda1.", "disk.loop0.")) for k in r)      # partitions, loops left out
    assert r["net.eth0.rx_Bps"] == 1000.0 and r["net.eth0.tx_Bps"] == 2000.0
    assert r["psi.io.some"] == 0.2 and r["psi.io.full"] == 0.1
    assert (r["load.1"], r["load.15"]) == (1.5, 0.25)
    assert s.psi_note == ""


def test_psi_absent_is_said(tmp_path):
    s, r = two(tmp_path, {}, {})
    assert not any(k.startswith("psi.") for k in r) and "pressure" in s.psi_note


def test_a_32bit_counter_that_wraps_and_a_device_that_resets(tmp_path):
    top = (1 << 32) - 1000
    s, r = two(tmp_path, dict(disks=disk("sda", top, top, 5, 5, 0)), dict(disks=disk("sda", 1000, 24, 1, 5, 0)))
    assert r["disk.sda.read_iops"] == 200.0            # 2000 ops over 10 s across the wrap
    assert "disk.sda.write_iops" not in r               # 5 -> 1: a reset, no rate
    assert r["disk.sda.write_Bps"] == 0.0


def test_devices_that_appear_and_disappear(tmp_path):
    s, r = two(tmp_path, dict(disks=disk("sda", 0, 0, 0, 0, 0)),
               dict(disks=disk("sdb", 5, 5, 5, 5, 5), rx=1), )
    write(tmp_path, disks=disk("sdb", 5, 5, 5, 5, 5), whole=("sda", "sdb"))
    assert not any(k.startswith("disk.") for k in r)    # sda gone, sdb new: neither has a rate yet
    a = s.read()
    write(tmp_path, disks=disk("sdb", 15, 5, 5, 5, 5), whole=("sda", "sdb"))
    b = s.read()
    b.t = a.t + 1
    assert ns.rates(a, b)["disk.sdb.read_iops"] == 10.0


def test_this_node():
    s = ns.NodeSampler("/")
    a = s.read()
    time.sleep(0.2)
    r = ns.rates(a, s.read())
    assert 0.999 < sum(r[f"cpu.{k}"] for k in ("user", "system", "iowait", "steal", "idle")) <= 1.0 + 1e-9
    assert r["mem.total"] > 0 and "load.1" in r


def test_counter_tracks_for_a_trace(tmp_path):
    # three reads 0.1 s apart: sda writes 1 MiB in the first interval, nothing in the second; eth0
    # never moves (left out), nor does the loopback; each value at its interval's end
    s = ns.NodeSampler(str(tmp_path))
    reads = []
    for k, (w, u) in enumerate([(0, 0), (2048, 50), (2048, 80)]):
        write(tmp_path, u=u, i=100 * k, disks=disk("sda", 0, 0, k and 1, w, 0), psi=0)
        r = s.read()
        r.t = 100.0 + 0.1 * k
        reads.append(r)
    c = ns.counter_tracks(reads, t0_ns=int(100.05e9), interval_s=0.1)
    names = {t.name: t for t in c.tracks}
    assert set(names) == {"disk sda write bytes/s", "cpu busy", "psi io some"}, names
    w = names["disk sda write bytes/s"]
    assert w.scope == "node" and w.device == "sda" and w.unit == "B/s"
    assert list(w.ts) == [int(round(100.1e9)) - int(100.05e9), int(round(100.2e9)) - int(100.05e9)]
    assert list(w.value) == pytest.approx([2048 * 512 / 0.1, 0.0])
    # an interval over before the trace's start is left out
    assert len(ns.counter_tracks(reads, t0_ns=int(100.15e9)).tracks[0].ts) == 1
