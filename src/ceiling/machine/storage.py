"""Storage facts: the file system a directory is on, the device behind it,
and the peak that device's link allows.

- The mount: the /proc/self/mountinfo entry with the directory's device
  number and the longest mount point above it (an overlay is followed to its
  upper layer's mount).
- No device peak for a network or user-space file system (its servers and
  network set it) nor a memory-backed one (no device: the figures are the
  page cache's).
- The device: MAJ:MIN in /sys/dev/block, partitions and one-slave
  device-mapper layers followed to the whole disk. Its peak is its link's:
  NVMe the PCIe link (current_link_speed x width, after line encoding),
  SATA the SATA link (sata_spd, after 8b/10b), in MiB/s, IOR's unit; other
  devices (virtio, loop, md, USB, SAS) are unknown, with the reason.
- Several directories (node-local ones under MPI): ``combine_fs`` sums the
  distinct devices' peaks.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..results.model import Peak
from ..sysfs import read_text as _read

MIB = 1 << 20
MIBS = "MiB/s"


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    mount_point: str
    fstype: str
    source: str
    major: int
    minor: int
    options: str = ""
    super_options: str = ""


def _unescape(s: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def parse_mountinfo(text: str) -> List[Mount]:
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 10 or "-" not in f[6:]:
            continue
        sep = f.index("-", 6)
        try:
            major, minor = (int(x) for x in f[2].split(":"))
        except ValueError:
            continue
        rest = f[sep + 1:]
        out.append(Mount(_unescape(f[4]), rest[0], _unescape(rest[1]) if len(rest) > 1 else "",
                         major, minor, f[5], rest[2] if len(rest) > 2 else ""))
    return out


def mount_of(path: str, mountinfo: str = "/proc/self/mountinfo") -> Optional[Mount]:
    """The mount holding ``path``: same device number, longest mount point above it."""
    try:
        with open(mountinfo) as f:
            mounts = parse_mountinfo(f.read())
        st = os.stat(path)
    except OSError:
        return None
    real = os.path.realpath(path)

    def above(m: Mount) -> bool:
        mp = m.mount_point.rstrip("/") or "/"
        return mp == "/" or real == mp or real.startswith(mp + "/")

    cands = [m for m in mounts if above(m)]
    same = [m for m in cands if (m.major, m.minor) == (os.major(st.st_dev), os.minor(st.st_dev))]
    pick = same or cands
    return max(pick, key=lambda m: len(m.mount_point)) if pick else None


NETWORK_FS = {"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "glusterfs", "fuse.glusterfs",
              "fuse.sshfs", "9p", "virtiofs", "fuse.ceph", "orangefs", "pvfs2", "wekafs", "fuse.weka"}
MEMORY_FS = {"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"}


def pcie_link_bytes_s(speed: str, width: str) -> Tuple[Optional[float], str]:
    """PCIe link bandwidth per direction after line encoding, bytes/s, and the formula.

    GT/s x lanes x encoding / 8: 8b/10b up to 5 GT/s (gen 1-2), 128b/130b at
    8-32 GT/s (gen 3-5), 242/256 FLIT at 64 GT/s (gen 6). Packet headers
    (TLP/DLLP, about 5-10 % at the usual 256-byte maximum payload) are not
    subtracted: the figure is an upper bound.
    """
    m = re.match(r"\s*([\d.]+)\s*GT/s", speed or "")
    try:
        lanes = int((width or "").strip())
    except ValueError:
        lanes = 0
    if not m or lanes <= 0:
        return None, f"link speed {speed!r} / width {width!r} not understood"
    gts = float(m.group(1))
    if gts <= 5.0:
        enc, enc_s = 0.8, "8b/10b"
    elif gts <= 32.0:
        enc, enc_s = 128 / 130, "128b/130b"
    else:
        enc, enc_s = 242 / 256, "242B/256B FLIT"
    bps = gts * 1e9 * lanes * enc / 8
    return bps, (f"PCIe {gts:g} GT/s x{lanes} x {enc_s} / 8 bits = {bps / 1e9:.3f} GB/s per direction "
                 "(packet headers not subtracted)")


def sata_link_bytes_s(spd: str) -> Tuple[Optional[float], str]:
    """SATA link bandwidth after 8b/10b encoding, bytes/s, and the formula."""
    m = re.match(r"\s*([\d.]+)\s*Gbps", spd or "")
    if not m:
        return None, f"SATA link speed {spd!r} not understood (link down?)"
    gbps = float(m.group(1))
    bps = gbps * 1e9 * 0.8 / 8
    return bps, f"SATA {gbps:g} Gb/s x 8b/10b / 8 bits = {bps / 1e6:.0f} MB/s"


def _disk_path(sys_root: str, major: int, minor: int, notes: List[str]) -> Optional[str]:
    """Resolved sysfs path of the whole disk behind MAJ:MIN (partitions and one-slave device-mapper followed)."""
    link = os.path.join(sys_root, "dev", "block", f"{major}:{minor}")
    if not os.path.exists(link):
        return None
    real = os.path.realpath(link)
    for _ in range(8):
        if os.path.exists(os.path.join(real, "partition")):
            real = os.path.dirname(real)
            continue
        slaves_dir = os.path.join(real, "slaves")
        slaves = sorted(os.listdir(slaves_dir)) if os.path.isdir(slaves_dir) else []
        if len(slaves) == 1:
            notes.append(f"{os.path.basename(real)} sits on {slaves[0]}")
            real = os.path.realpath(os.path.join(slaves_dir, slaves[0]))
            continue
        if len(slaves) > 1:
            notes.append(f"{os.path.basename(real)} spans {', '.join(slaves)}")
        break
    return real


def device_peak(major: int, minor: int, sys_root: str = "/sys") -> Tuple[Peak, Dict[str, Any]]:
    """The link peak of the block device MAJ:MIN in MiB/s (NVMe: PCIe link; SATA: SATA link), or unknown and why."""
    info: Dict[str, Any] = {}
    notes: List[str] = []

    def unknown(why: str) -> Tuple[Peak, Dict[str, Any]]:
        if notes:
            info["stack"] = notes
        return Peak(None, MIBS, f"unknown: {why}"), info

    if major == 0:
        return unknown("no block device behind this mount (network, memory or virtual file system)")
    disk = _disk_path(sys_root, major, minor, notes)
    if disk is None:
        return unknown(f"no {sys_root}/dev/block/{major}:{minor} entry")
    name = os.path.basename(disk)
    info["device"] = name
    parts = disk.split(os.sep)
    rot = _read(os.path.join(disk, "queue", "rotational"))
    if rot is not None:
        info["rotational"] = rot == "1"
    model = _read(os.path.join(disk, "device", "model"))
    if model:
        info["model"] = model
    if len(notes) and notes[-1].startswith(f"{name} spans"):
        return unknown(f"{name} spans several devices ({notes[-1]}): the peak of a striped or mirrored set is "
                       "not derived")
    ctrl = next((c for c in parts if re.fullmatch(r"nvme\d+", c)), None)
    if ctrl is None:
        sub = next((i for i, c in enumerate(parts) if re.fullmatch(r"nvme-subsys\d+", c)), None)
        if sub is not None:
            subdir = os.sep.join(parts[:sub + 1])
            ctrls = sorted(c for c in (os.listdir(subdir) if os.path.isdir(subdir) else [])
                           if re.fullmatch(r"nvme\d+", c))
            if ctrls:
                ctrl = ctrls[0]
                if len(ctrls) > 1:
                    notes.append(f"multipath over {', '.join(ctrls)}: one controller's link is shown")
    if ctrl is not None or re.fullmatch(r"nvme\d+n\d+", name):
        info["kind"] = "nvme"
        if ctrl is None:
            ctrl = re.match(r"(nvme\d+)n", name).group(1)
        dev = os.path.join(sys_root, "class", "nvme", ctrl, "device")
        speed = _read(os.path.join(dev, "current_link_speed"))
        width = _read(os.path.join(dev, "current_link_width"))
        model = model or _read(os.path.join(sys_root, "class", "nvme", ctrl, "model"))
        if model:
            info["model"] = model
        if speed is None or width is None:
            return unknown(f"NVMe {ctrl}: {dev}/current_link_speed or current_link_width not readable "
                           "(a virtual NVMe device has no PCIe link)")
        bps, formula = pcie_link_bytes_s(speed, width)
        info.update(link_speed=speed, link_width=width)
        if bps is None:
            return unknown(f"NVMe {ctrl}: {formula}")
        if notes:
            info["stack"] = notes
        return Peak(bps / MIB, MIBS, f"NVMe {ctrl} link: {formula}; read from {dev}"), info
    ata = next((c for c in parts if re.fullmatch(r"ata\d+", c)), None)
    if ata is not None:
        info["kind"] = "sata"
        port = ata[3:]
        link = os.path.join(sys_root, "class", "ata_link", f"link{port}", "sata_spd")
        spd = _read(link)
        if spd is None:
            return unknown(f"SATA {ata}: {link} not readable")
        bps, formula = sata_link_bytes_s(spd)
        info["link_speed"] = spd
        if bps is None:
            return unknown(formula)
        note = "; a spinning disk reaches a fraction of it" if info.get("rotational") else ""
        if notes:
            info["stack"] = notes
        return Peak(bps / MIB, MIBS, f"{formula}; read from {link}{note}"), info
    if any(re.fullmatch(r"virtio\d+", c) for c in parts):
        info["kind"] = "virtio"
        return unknown(f"{name} is a virtio disk: a virtual device has no link speed, the host's storage "
                       "and its limits decide")
    if "virtual" in parts:
        info["kind"] = "virtual"
        return unknown(f"{name} is a virtual block device (loop, zram, device-mapper, md): no link to read")
    if "usb" in disk:
        info["kind"] = "usb"
        return unknown(f"{name} is on USB: its link is not read")
    info["kind"] = "other"
    return unknown(f"{name}: neither NVMe nor SATA (SAS, SCSI, MMC links are not read)")


@dataclass
class FileSystem:
    """Where the run writes: the mount, its type and the device peak."""

    dir: str
    mount: Optional[Mount]
    peak: Peak
    device: Dict[str, Any] = field(default_factory=dict)
    groups: List[Dict[str, Any]] = field(default_factory=list)   # under MPI, one per directory (combine_fs)

    @property
    def fstype(self) -> str:
        return self.mount.fstype if self.mount else "unknown"

    def context(self) -> Dict[str, Any]:
        m = self.mount
        return {"fs_type": self.fstype, "fs_source": m.source if m else "", "mount_point": m.mount_point if m else "",
                "dir": self.dir, **({"device": self.device} if self.device else {}),
                **({"directories": self.groups} if self.groups else {})}


def describe_fs(path: str, mountinfo: str = "/proc/self/mountinfo", sys_root: str = "/sys") -> FileSystem:
    m = mount_of(path, mountinfo)
    if m is None:
        return FileSystem(path, None, Peak(None, MIBS, f"unknown: the mount of {path} is not in {mountinfo}"))
    if m.fstype in MEMORY_FS:
        return FileSystem(path, m, Peak(None, MIBS, f"unknown: {m.fstype} is memory-backed, no device; "
                                                    "the figures are the page cache's"))
    if m.fstype in NETWORK_FS or m.fstype.startswith("fuse"):
        return FileSystem(path, m, Peak(None, MIBS, f"unknown: {m.fstype} ({m.source}) is a network or "
                                                    "user-space file system: its servers and network set the peak"))
    major, minor = m.major, m.minor
    if m.fstype == "overlay":
        up = re.search(r"(?:^|,)upperdir=([^,]+)", m.super_options)
        under = mount_of(up.group(1), mountinfo) if up and os.path.exists(up.group(1)) else None
        if under is None:
            return FileSystem(path, m, Peak(None, MIBS, "unknown: overlay file system whose upper layer's "
                                                        "device could not be found"))
        major, minor = under.major, under.minor
    peak, dev = device_peak(major, minor, sys_root)
    return FileSystem(path, m, peak, dev)


def combine_fs(parts: List[Tuple[str, List[str], FileSystem]]) -> FileSystem:
    """One description of the directories the ranks write to: (host, nodes, file system)
    of each group's directory. One directory: its own. Several (node-local --dir): the
    peak of the aggregate is the sum of each distinct device's (a device shared by two
    groups on one host counted once), unknown when one of them is; every directory is
    listed in the context."""
    if len(parts) == 1:
        return parts[0][2]
    first = parts[0][2]
    seen: Dict[Tuple[str, str], Peak] = {}
    for host, _, fs in parts:
        seen.setdefault((host, fs.mount.source if fs.mount else fs.dir), fs.peak)
    unknown = [(k, pk) for k, pk in seen.items() if not pk.known]
    if unknown:
        (host, src), pk = unknown[0]
        peak = Peak(None, MIBS, f"unknown: {src} on {host}: {pk.provenance}")
    else:
        peak = Peak(sum(pk.value for pk in seen.values()), MIBS,    # type: ignore[misc]
                    f"sum of {len(seen)} devices' peaks, one per directory: "
                    + "; ".join(f"{src} on {host} {pk.value:.0f} {MIBS}" for (host, src), pk in seen.items()))
    out = FileSystem(first.dir, first.mount, peak, first.device)
    out.groups = [{"host": host, "nodes": nodes, **fs.context(),
                   "peak_mibs": fs.peak.value, "peak_provenance": fs.peak.provenance} for host, nodes, fs in parts]
    return out
