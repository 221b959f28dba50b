"""probes/exec_reads.py against the kernel: a program's rchar and syscr at exit, less every
read-like system call strace saw it make, are what the model says execve read (its ELF
headers and its loader's), for programs of different header sizes."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from ceiling.probes.exec_reads import exec_reads

READS = "read,pread64,readv,preadv,preadv2"


def _rchar_at_exit(argv):
    """(rchar, syscr) of the program run alone, read from /proc/PID/io while it is a zombie."""
    pid = os.posix_spawn(argv[0], argv, dict(os.environ))
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        with open(f"/proc/{pid}/io") as f:
            io = dict(ln.split(": ") for ln in f.read().splitlines() if ln)
    finally:
        os.waitpid(pid, 0)
    return int(io["rchar"]), int(io["syscr"])


def _strace_reads(strace, argv, tmp_path):
    log = tmp_path / "s.txt"
    subprocess.run([strace, "-f", "-qq", "-e", f"trace={READS}", "-o", str(log), *argv],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    sums = [0, 0]
    for ln in log.read_text().splitlines():
        m = re.search(r"= (\d+)$", ln)
        if m:
            sums[0] += int(m.group(1))
            sums[1] += 1
    return sums


@pytest.mark.parametrize("exe", ["/bin/true", sys.executable, shutil.which("gcc") or "", shutil.which("make") or ""])
def test_what_execve_reads_is_rchar_less_the_programs_system_calls(exe, tmp_path):
    strace = shutil.which("strace")
    if strace is None or not exe:
        pytest.skip("needs strace and the program")
    if subprocess.run([strace, "-o", "/dev/null", "true"], capture_output=True).returncode != 0:
        pytest.skip("strace cannot trace here (ptrace refused)")
    exe = os.path.realpath(exe)
    argv = [exe, "--version"] if exe != "/bin/true" and not exe.endswith("/true") else [exe]
    rchar, syscr = _rchar_at_exit(argv)
    traced, calls = _strace_reads(strace, argv, tmp_path)
    assert exec_reads(exe) == {"rchar": rchar - traced, "syscr": syscr - calls}, (rchar, traced, syscr, calls)


def test_a_file_that_is_not_elf_has_no_figure(tmp_path):
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    assert exec_reads(str(script)) is None and exec_reads(str(tmp_path / "missing")) is None
    broken = tmp_path / "b"
    broken.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9)
    assert exec_reads(str(broken)) is None


def test_a_static_program_reads_its_headers_and_arm64_its_gnu_property_note(tmp_path):
    # an ELF64 file with no interpreter: its first 256 bytes and its two program headers (2 x 56),
    # and on arm64 the PT_GNU_PROPERTY note (32 bytes) one read more
    import struct
    ehdr = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 64, 0, 0, 64, 56, 2, 0, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, 400, 400, 4096)
    prop = struct.pack("<IIQQQQQQ", 0x6474E553, 4, 176, 0, 0, 32, 32, 8)
    exe = tmp_path / "static"
    exe.write_bytes(ehdr + load + prop + b"\0" * 400)
    assert exec_reads(str(exe), machine="x86_64") == {"rchar": 256 + 112, "syscr": 2}
    assert exec_reads(str(exe), machine="aarch64") == {"rchar": 256 + 112 + 32, "syscr": 3}
