"""The peak of the network link a cross-node pair of ranks uses, read from /sys.

InfiniBand: the rate of the active ports (/sys/class/infiniband/*/ports/*/
rate, data rate after line encoding); Ethernet: the speed of the one
physical interface that is up (/sys/class/net/*/speed). Several candidates
of different rates: unknown, with the reason, since which one MPI uses is
not known (UCX_NET_DEVICES picks an InfiniBand port when set).
"""
from __future__ import annotations

import glob
import os
from typing import Dict, Optional

from ..results.model import Peak
from ..sysfs import read_text as _read

MBS = "MB/s"

_IB_ENCODING = {"SDR": 0.8, "DDR": 0.8, "QDR": 0.8, "FDR10": 64 / 66, "FDR": 64 / 66}


def link_peak(root: str = "/", env: Optional[Dict[str, str]] = None) -> Peak:
    """The peak of the link a cross-node pair uses, MB/s (10^6 B/s) one way, or unknown with the reason.

    InfiniBand: active ports' rate ("100 Gb/sec (4X EDR)"); SDR/DDR/QDR rates
    are signalling rates with 8b/10b encoding (x 0.8), FDR's with 64b/66b;
    EDR and later rates are data rates. UCX_NET_DEVICES (e.g. mlx5_0:1) picks
    the port when set. Ethernet: /sys/class/net/IF/speed (Mb/s) of physical
    interfaces that are up; the line rate, headers not deducted.
    """
    env = os.environ if env is None else env
    base = os.path.join(root, "sys/class")
    ports = []
    for rate_path in sorted(glob.glob(os.path.join(base, "infiniband/*/ports/*/rate"))):
        port_dir = os.path.dirname(rate_path)
        dev, port = rate_path.split(os.sep)[-4], os.path.basename(port_dir)
        state = _read(os.path.join(port_dir, "state")) or ""
        rate = _read(rate_path) or ""
        if "ACTIVE" in state and rate:
            ports.append((f"{dev}:{port}", rate))
    want = [d.strip() for d in env.get("UCX_NET_DEVICES", "").split(",") if d.strip() and d.strip() != "all"]
    if want and ports:
        chosen = [p for p in ports if p[0] in want]
        if chosen:
            ports = chosen
    if ports:
        parsed = {}
        for name, rate in ports:
            try:
                gbps = float(rate.split()[0])
            except (ValueError, IndexError):
                continue
            gen = rate.split("(")[-1].rstrip(")").split()[-1] if "(" in rate else ""
            factor = _IB_ENCODING.get(gen, 1.0)
            parsed[name] = (gbps * factor * 125.0, rate, factor)
        values = {round(v[0], 3) for v in parsed.values()}
        if len(values) == 1:
            name, (mbs, rate, factor) = next(iter(parsed.items()))
            enc = f" x {factor:.3g} (line encoding)" if factor != 1.0 else ""
            which = (f"port {name}" if len(parsed) == 1 else
                     f"{len(parsed)} active ports at the same rate ({', '.join(parsed)})")
            return Peak(mbs, MBS, f"InfiniBand {which}: rate '{rate}'{enc} = {mbs:.0f} MB/s "
                                  "(/sys/class/infiniband/*/ports/*/rate)")
        if parsed:
            return Peak(None, MBS, "unknown: active InfiniBand ports with different rates ("
                        + ", ".join(f"{n} {v[1]}" for n, v in parsed.items())
                        + "); which one MPI uses is not known (set UCX_NET_DEVICES)")
    nics = []
    for dev in sorted(glob.glob(os.path.join(base, "net/*"))):
        name = os.path.basename(dev)
        if name == "lo" or not os.path.exists(os.path.join(dev, "device")):
            continue
        if (_read(os.path.join(dev, "operstate")) or "") != "up":
            continue
        try:
            speed = int(_read(os.path.join(dev, "speed")) or "-1")
        except ValueError:
            speed = -1
        nics.append((name, speed))
    known = [(n, s) for n, s in nics if s > 0]
    if not nics:
        return Peak(None, MBS, "unknown: no active InfiniBand port and no physical network interface that is up")
    if not known:
        return Peak(None, MBS, "unknown: the network interfaces that are up report no speed ("
                    + ", ".join(n for n, _ in nics) + "; virtual NICs report -1 in /sys/class/net/IF/speed)")
    speeds = {s for _, s in known}
    if len(speeds) == 1:
        s = known[0][1]
        which = known[0][0] if len(known) == 1 else ", ".join(n for n, _ in known)
        return Peak(s / 8.0, MBS, f"Ethernet {which}: {s} Mb/s line rate = {s / 8:.0f} MB/s "
                                  "(/sys/class/net/IF/speed; headers not deducted)")
    return Peak(None, MBS, "unknown: interfaces with different speeds (" + ", ".join(f"{n} {s} Mb/s" for n, s in known)
                + "); which one MPI uses is not known")
