"""The text files beside the interposer's event files that ``probes/interpose_events`` reads with them:
each process's record (its ``file id=N ... path=P`` lines: the file table, by host and pid), region.c's
``trace-<pid>-<start_ns>.regions`` (region names by image) and mpi_comm.c's ``trace-*.comms`` (each
communicator's members)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Tuple
from urllib.parse import unquote

# the event files (interpose_events reads them; they are not records). -r<rank>: another rank's file that rank 0's
# interposer received at MPI_Finalize (a wrapped launch, csrc/interpose/mpi_trace.c), named apart since two nodes
# may have the same pid
FILE_PATTERN = re.compile(r"^trace-(\d+)-(\d+)-(\d+)(?:-r(\d+))?\.bin$")
_FILE_LINE = re.compile(r"^file id=(\d+) .*? path=(\S+)")
_PROCESS = re.compile(r"^process pid=(\d+) ppid=(\d+) .*? host=(\S+) exe=(\S+)")


def record_files(directory: str) -> Dict[Tuple[str, int], Dict[int, str]]:
    """(host, pid) -> {file id: path} from the records in directory (every file not an event file)."""
    out: Dict[Tuple[str, int], Dict[int, str]] = {}
    for p in sorted(Path(directory).iterdir()):
        if FILE_PATTERN.match(p.name) or not p.is_file():
            continue
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        key = None
        for line in text.splitlines():
            m = _PROCESS.match(line)
            if m:
                key = (unquote(m.group(3)), int(m.group(1)))
                out[key] = {}
                continue
            m = _FILE_LINE.match(line)
            if m and key is not None:
                out[key][int(m.group(1))] = unquote(m.group(2))
    return out


def files_of(records: Dict[Tuple[str, int], Dict[int, str]], host: str, pid: int) -> Dict[int, str]:
    """A process's file table: its host's and pid's, else its pid's where only one host has that pid."""
    if (host, pid) in records:
        return records[(host, pid)]
    same = [v for (h, p), v in records.items() if p == pid]
    return same[0] if len(same) == 1 else {}


def region_names(directory: str) -> Dict[Tuple[int, int, str], Dict[int, str]]:
    """(pid, start_ns, "-r<rank>" or "") -> {index: name} from region.c's ``trace-<pid>-<start_ns>.regions``
    files (the suffix: a file rank 0 received, as the event files of the same image carry it)."""
    out: Dict[Tuple[int, int, str], Dict[int, str]] = {}
    for p in Path(directory).glob("trace-*-*.regions"):
        m = re.match(r"^trace-(\d+)-(\d+)(-r\d+)?\.regions$", p.name)
        if not m:
            continue
        names = out.setdefault((int(m.group(1)), int(m.group(2)), m.group(3) or ""), {})
        for line in p.read_text(errors="replace").splitlines():
            i, _, name = line.partition(" ")
            if i.isdigit():
                names[int(i)] = name
    return out


def comm_members(directory: str) -> Dict[int, List[int]]:
    """Communicator id -> its members' world ranks in rank order, from mpi_comm.c's ``trace-*.comms`` lines
    ("ID N R0 R1 ...", every process's own and those rank 0 received). Members write the same id for
    the same communicator; an id two lines give different members (a hash collision) is left out."""
    out: Dict[int, List[int]] = {}
    clash = set()
    for p in Path(directory).glob("trace-*.comms"):
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            f = line.split()
            try:
                cid, n, ranks = int(f[0]), int(f[1]), [int(x) for x in f[2:]]
            except (ValueError, IndexError):
                continue
            if n != len(ranks):                         # a line cut short (a killed process)
                continue
            if out.get(cid, ranks) != ranks:
                clash.add(cid)
            out[cid] = ranks
    return {k: v for k, v in out.items() if k not in clash}
