"""The interposer's Fortran MPI bindings (csrc/interpose/mpi_fortran.c): a Fortran program
(`use mpi`, and one with `use mpi_f08`) built with the Fortran wrapper of the MPI that
mpi4py loads, profiled, and its calls counted to the call and the byte under their C names.
Open MPI's Fortran libraries call PMPI_* directly (its mpi_f08 module through its own
mpif.h code), so without these wrappers such a program showed no MPI at all.
Skipped where the MPI has no Fortran wrapper (the MPICH wheel) or no Fortran compiler."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpiutil import needs_mpi, run_env
from test_interpose import NEEDS_LIB
from test_profile_mpi import run_or_show

PROGRAM = """
program app
  use mpi
  implicit none
  integer :: ierr, rank, nranks, i, req, st(MPI_STATUS_SIZE), counts(2), displs(2)
  double precision :: buf(1000), x(4), g(8)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  buf = 1.0d0
  do i = 1, 50
    if (rank == 0) then
      call MPI_Send(buf, 1000, MPI_DOUBLE_PRECISION, 1, 1, MPI_COMM_WORLD, ierr)
      call MPI_Recv(buf, 500, MPI_DOUBLE_PRECISION, 1, 1, MPI_COMM_WORLD, st, ierr)
    else
      call MPI_Recv(buf, 1000, MPI_DOUBLE_PRECISION, 0, 1, MPI_COMM_WORLD, st, ierr)
      call MPI_Send(buf, 500, MPI_DOUBLE_PRECISION, 0, 1, MPI_COMM_WORLD, ierr)
    end if
  end do
  call MPI_Irecv(x, 4, MPI_DOUBLE_PRECISION, 1 - rank, 2, MPI_COMM_WORLD, req, ierr)
  call MPI_Send(buf, 4, MPI_DOUBLE_PRECISION, 1 - rank, 2, MPI_COMM_WORLD, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call MPI_Allreduce(MPI_IN_PLACE, buf, 1000, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Bcast(x, 4, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  counts = (/ 3, 5 /)
  displs = (/ 0, 3 /)
  call MPI_Allgatherv(x, counts(rank + 1), MPI_DOUBLE_PRECISION, g, counts, displs, MPI_DOUBLE_PRECISION, &
                      MPI_COMM_WORLD, ierr)
  call MPI_Ibcast(x, 4, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (buf(1) /= nranks) stop 3
  call MPI_Finalize(ierr)
end program
"""

# The same calls through the mpi_f08 module, ierror given to some and left out of others
# (it is OPTIONAL there: the wrapper must not write through a null pointer).
PROGRAM_F08 = """
program app
  use mpi_f08
  implicit none
  integer :: ierr, rank, nranks, i
  type(MPI_Request) :: req
  type(MPI_Status) :: st
  double precision :: buf(1000), x(4), g(8)
  integer :: counts(2), displs(2)
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  buf = 1.0d0
  do i = 1, 50
    if (rank == 0) then
      call MPI_Send(buf, 1000, MPI_DOUBLE_PRECISION, 1, 1, MPI_COMM_WORLD)
      call MPI_Recv(buf, 500, MPI_DOUBLE_PRECISION, 1, 1, MPI_COMM_WORLD, st, ierr)
    else
      call MPI_Recv(buf, 1000, MPI_DOUBLE_PRECISION, 0, 1, MPI_COMM_WORLD, st)
      call MPI_Send(buf, 500, MPI_DOUBLE_PRECISION, 0, 1, MPI_COMM_WORLD, ierr)
    end if
  end do
  call MPI_Irecv(x, 4, MPI_DOUBLE_PRECISION, 1 - rank, 2, MPI_COMM_WORLD, req)
  call MPI_Send(buf, 4, MPI_DOUBLE_PRECISION, 1 - rank, 2, MPI_COMM_WORLD)
  call MPI_Wait(req, MPI_STATUS_IGNORE)
  call MPI_Allreduce(MPI_IN_PLACE, buf, 1000, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Bcast(x, 4, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD)
  counts = (/ 3, 5 /)
  displs = (/ 0, 3 /)
  call MPI_Allgatherv(x, counts(rank + 1), MPI_DOUBLE_PRECISION, g, counts, displs, MPI_DOUBLE_PRECISION, &
                      MPI_COMM_WORLD)
  call MPI_Ibcast(x, 4, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, req)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call MPI_Barrier(MPI_COMM_WORLD)
  if (buf(1) /= nranks) stop 3
  call MPI_Finalize(ierr)
end program
"""


# MPI-IO from Fortran (Open MPI's Fortran MPI-IO goes to PMPI_File_* directly): each rank
# writes 4096 bytes at its own offset collectively, reads them back, syncs, closes.
PROGRAM_IO = """
program app
  use mpi
  implicit none
  integer :: ierr, rank, fh, st(MPI_STATUS_SIZE)
  integer(kind=MPI_OFFSET_KIND) :: off
  character(len=512) :: path
  character :: buf(4096)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, path)
  buf = 'x'
  off = rank * 4096
  call MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, fh, ierr)
  if (ierr /= 0) stop 2
  call MPI_File_write_at_all(fh, off, buf, 4096, MPI_CHARACTER, st, ierr)
  call MPI_File_read_at(fh, off, buf, 1000, MPI_CHARACTER, st, ierr)
  call MPI_File_sync(fh, ierr)
  call MPI_File_close(fh, ierr)
  call MPI_Finalize(ierr)
end program
"""


def _build(mpi_setup, d, name, source):
    tmp, found = mpi_setup
    cc = Path(found["mpicc"])
    fc = next((str(cc.with_name(n)) for n in ("mpifort", "mpif90") if cc.with_name(n).exists()), None)
    if fc is None:
        pytest.skip(f"no Fortran wrapper beside {cc} (this MPI was built without Fortran)")
    (d / f"{name}.f90").write_text(source)
    r = subprocess.run([fc, "-O1", "-o", str(d / name), str(d / f"{name}.f90")], capture_output=True, text=True,
                       timeout=120, cwd=d, env=run_env(tmp))
    if r.returncode != 0 and ("not found" in r.stderr or "No such file" in r.stderr or not shutil.which("gfortran")):
        pytest.skip(f"{fc} cannot compile Fortran here: {r.stderr.strip()[:200]}")
    if r.returncode != 0 and name == "app_f08" and "mpi_f08" in r.stderr:
        pytest.skip(f"this MPI has no mpi_f08 module: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr
    return d / name, found, tmp


@pytest.fixture(scope="module", params=["app", "app_f08"])
def fortran_app(mpi_setup, tmp_path_factory, request):
    d = tmp_path_factory.mktemp("fapp")
    return _build(mpi_setup, d, request.param, PROGRAM if request.param == "app" else PROGRAM_F08)


@needs_mpi
@NEEDS_LIB
def test_a_fortran_programs_mpi_calls_are_counted_under_their_c_names(fortran_app, tmp_path):
    exe, found, tmp = fortran_app
    out = tmp_path / "p.json"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = run_or_show([sys.executable, "-m", "ceiling", "profile", "--no-store", "--save-json", str(out), "--",
                     *found["argv2"], str(exe)], env)
    assert r.returncode == 0, r.stderr
    check_calls(json.loads(out.read_text())["environment"]["profile"]["mpi"])


def check_calls(mpi):
    """PROGRAM's and PROGRAM_F08's calls, to the call and the byte."""
    assert mpi["ranks"] == 2 and mpi["size"] == 2
    for rank in mpi["per_rank"]:
        c, me = rank["classes"], rank["rank"]
        sent, got = (8000, 4000) if me == 0 else (4000, 8000)
        assert c["send"]["calls"] == 51 and c["send"]["bytes"] == 50 * sent + 32
        assert c["recv"]["calls"] == 50 and c["recv"]["bytes"] == 50 * got      # from the status
        assert c["post"]["calls"] == 1 and c["post"]["bytes"] == 32              # the Irecv, posted
        assert c["wait"]["calls"] == 2
        # Allreduce in place, Bcast, Barrier, and Allgatherv's own block (3 or 5 doubles)
        assert c["coll"]["calls"] == 4 and c["coll"]["bytes"] == 8000 + 32 + (24 if me == 0 else 40)
        assert c["icoll"]["calls"] == 1 and c["icoll"]["bytes"] == 32           # the Ibcast, posted
        peers = {int(k): v for k, v in rank["peers"].items()}
        assert peers == {1 - me: {"calls": 51, "bytes": 50 * sent + 32}}          # by world rank
    names = {f["fn"] for f in mpi["functions"]}
    assert {"MPI_Init", "MPI_Finalize", "MPI_Send", "MPI_Recv", "MPI_Irecv", "MPI_Wait", "MPI_Allreduce",
            "MPI_Bcast", "MPI_Barrier", "MPI_Allgatherv", "MPI_Ibcast"} <= names


def check_io(prof, data):
    """PROGRAM_IO's MPI-IO, by rank and in the file's record."""
    for rank in prof["mpi"]["per_rank"]:
        c = rank["classes"]
        assert c["io_write"]["calls"] == 1 and c["io_write"]["bytes"] == 4096, c
        assert c["io_read"]["calls"] == 1 and c["io_read"]["bytes"] == 1000, c     # from the status
        assert c["io_meta"]["calls"] == 2 and c["io_sync"]["calls"] == 1, c        # open, close; sync
    [f] = [f for f in prof["files"]["shown"] if f["path"] == str(data)]
    assert f["write_bytes"] == 2 * 4096 and f["read_bytes"] == 2 * 1000 and f["processes"] == 2, f


@needs_mpi
@NEEDS_LIB
def test_a_fortran_programs_mpi_io_is_counted_with_its_file(mpi_setup, tmp_path_factory, tmp_path):
    exe, found, tmp = _build(mpi_setup, tmp_path_factory.mktemp("fio"), "app_io", PROGRAM_IO)
    out, data = tmp_path / "p.json", tmp_path / "shared.dat"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = run_or_show([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json", str(out),
                     "--", *found["argv2"], str(exe), str(data)], env)
    assert r.returncode == 0, r.stderr
    check_io(json.loads(out.read_text())["environment"]["profile"], data)


# MPICH's own Fortran (its Fortran layer calls the C names; MPI_F_STATUS_IGNORE is set only when
# that layer starts), where Debian's mpich package is installed beside whatever mpi4py loads: the
# MPICH wheel has no Fortran. Skipped elsewhere (CI).
MPICH_FC, MPICH_RUN = shutil.which("mpif90.mpich"), shutil.which("mpiexec.mpich")


@NEEDS_LIB
@pytest.mark.skipif(not (MPICH_FC and MPICH_RUN), reason="no mpif90.mpich / mpiexec.mpich (Debian's mpich package)")
@pytest.mark.parametrize("name", ["app", "app_f08", "app_io"])
def test_mpichs_own_fortran_is_counted_alike(tmp_path, name):
    src = {"app": PROGRAM, "app_f08": PROGRAM_F08, "app_io": PROGRAM_IO}[name]
    (tmp_path / f"{name}.f90").write_text(src)
    r = subprocess.run([MPICH_FC, "-O1", "-o", str(tmp_path / name), f"{name}.f90"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out, data = tmp_path / "p.json", tmp_path / "shared.dat"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "HYDRA_", "OMPI_"))}
    r = run_or_show([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json", str(out),
                     "--", MPICH_RUN, "-n", "2", str(tmp_path / name), *([str(data)] if name == "app_io" else [])],
                    dict(env, NO_COLOR="1"))
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())["environment"]["profile"]
    assert prof["mpi"]["family"] == "mpich"
    if name == "app_io":
        check_io(prof, data)
    else:
        check_calls(prof["mpi"])
