"""The interposer's Fortran MPI bindings (csrc/interpose/mpi_fortran.c): Fortran programs
(`use mpi`, and ones with `use mpi_f08`; point-to-point and collectives, MPI-IO, persistent
requests and one-sided calls, neighbourhood collectives and Alltoallw, MPI 4 persistent
collectives, the neighbourhood ones included) built with the Fortran wrapper of
the MPI that mpi4py loads, profiled, and their calls counted to the call and the byte under
their C names.
Open MPI's Fortran libraries call PMPI_* directly (its mpi_f08 module through its own
mpif.h code), so without these wrappers such a program showed no MPI at all.
Skipped where the MPI has no Fortran wrapper (the MPICH wheel) or no Fortran compiler, and the
persistent collectives where its Fortran has none (Open MPI 4.1)."""
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


# Persistent point-to-point requests and one-sided communication from Fortran (Open MPI's
# Fortran goes to PMPI_Send_init, PMPI_Start, PMPI_Put, PMPI_Win_fence ... directly): a send and a
# receive of 100 doubles started 4 times by MPI_Startall, new ones of 20 started twice one by one;
# 3 rounds of fence / put 1000 doubles / fence / get 100 / fence; a lock epoch with an accumulate
# and a fetch-and-op; a lock_all epoch with an Rput of 10 and a flush.
PROGRAM_P_RMA = """
program app
  use mpi
  implicit none
  integer :: ierr, rank, other, i, k, win, reqs(2), req
  integer(kind=MPI_ADDRESS_KIND) :: winsize, disp
  double precision :: a(100), b(100), wbuf(1000), mine(1000), got(100), one, old
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  other = 1 - rank
  a = rank
  call MPI_Send_init(a, 100, MPI_DOUBLE_PRECISION, other, 3, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Recv_init(b, 100, MPI_DOUBLE_PRECISION, other, 3, MPI_COMM_WORLD, reqs(2), ierr)
  do i = 1, 4
    call MPI_Startall(2, reqs, ierr)
    call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  end do
  if (b(1) /= other) stop 3
  call MPI_Request_free(reqs(1), ierr)
  call MPI_Request_free(reqs(2), ierr)
  call MPI_Recv_init(b, 20, MPI_DOUBLE_PRECISION, other, 4, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Send_init(a, 20, MPI_DOUBLE_PRECISION, other, 4, MPI_COMM_WORLD, reqs(1), ierr)
  do i = 1, 2
    call MPI_Start(reqs(2), ierr)
    call MPI_Start(reqs(1), ierr)
    call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  end do
  call MPI_Request_free(reqs(1), ierr)
  call MPI_Request_free(reqs(2), ierr)
  wbuf = 0
  winsize = 8000
  disp = 0
  call MPI_Win_create(wbuf, winsize, 8, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  do i = 1, 3
    do k = 1, 1000
      mine(k) = rank * 1000 + k + i
    end do
    call MPI_Win_fence(0, win, ierr)
    call MPI_Put(mine, 1000, MPI_DOUBLE_PRECISION, other, disp, 1000, MPI_DOUBLE_PRECISION, win, ierr)
    call MPI_Win_fence(0, win, ierr)
    call MPI_Get(got, 100, MPI_DOUBLE_PRECISION, other, disp, 100, MPI_DOUBLE_PRECISION, win, ierr)
    call MPI_Win_fence(0, win, ierr)
    call MPI_F_sync_reg(got)
    if (got(5) /= rank * 1000 + 5 + i) stop 4
  end do
  one = 1
  call MPI_Win_lock(MPI_LOCK_SHARED, other, 0, win, ierr)
  call MPI_Accumulate(one, 1, MPI_DOUBLE_PRECISION, other, disp, 1, MPI_DOUBLE_PRECISION, MPI_SUM, win, ierr)
  call MPI_Fetch_and_op(one, old, MPI_DOUBLE_PRECISION, other, disp + 1, MPI_SUM, win, ierr)
  call MPI_Win_unlock(other, win, ierr)
  call MPI_Win_lock_all(0, win, ierr)
  call MPI_Rput(mine, 10, MPI_DOUBLE_PRECISION, other, disp + 10, 10, MPI_DOUBLE_PRECISION, win, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call MPI_Win_flush(other, win, ierr)
  call MPI_Win_unlock_all(win, ierr)
  call MPI_Win_free(win, ierr)
  call MPI_Finalize(ierr)
end program
"""

# The same through mpi_f08, ierror left out of some calls.
PROGRAM_P_RMA_F08 = """
program app
  use mpi_f08
  implicit none
  integer :: ierr, rank, other, i, k
  type(MPI_Win) :: win
  type(MPI_Request) :: reqs(2), req
  integer(kind=MPI_ADDRESS_KIND) :: winsize, disp
  double precision :: a(100), b(100), mine(1000), one, old
  double precision, asynchronous :: wbuf(1000), got(100)
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  other = 1 - rank
  a = rank
  call MPI_Send_init(a, 100, MPI_DOUBLE_PRECISION, other, 3, MPI_COMM_WORLD, reqs(1))
  call MPI_Recv_init(b, 100, MPI_DOUBLE_PRECISION, other, 3, MPI_COMM_WORLD, reqs(2), ierr)
  do i = 1, 4
    call MPI_Startall(2, reqs)
    call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
  end do
  if (b(1) /= other) stop 3
  call MPI_Request_free(reqs(1))
  call MPI_Request_free(reqs(2), ierr)
  call MPI_Recv_init(b, 20, MPI_DOUBLE_PRECISION, other, 4, MPI_COMM_WORLD, reqs(2))
  call MPI_Send_init(a, 20, MPI_DOUBLE_PRECISION, other, 4, MPI_COMM_WORLD, reqs(1))
  do i = 1, 2
    call MPI_Start(reqs(2))
    call MPI_Start(reqs(1), ierr)
    call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
  end do
  call MPI_Request_free(reqs(1))
  call MPI_Request_free(reqs(2))
  wbuf = 0
  winsize = 8000
  disp = 0
  call MPI_Win_create(wbuf, winsize, 8, MPI_INFO_NULL, MPI_COMM_WORLD, win)
  do i = 1, 3
    do k = 1, 1000
      mine(k) = rank * 1000 + k + i
    end do
    call MPI_Win_fence(0, win)
    call MPI_Put(mine, 1000, MPI_DOUBLE_PRECISION, other, disp, 1000, MPI_DOUBLE_PRECISION, win)
    call MPI_Win_fence(0, win, ierr)
    call MPI_Get(got, 100, MPI_DOUBLE_PRECISION, other, disp, 100, MPI_DOUBLE_PRECISION, win, ierr)
    call MPI_Win_fence(0, win)
    call MPI_F_sync_reg(got)
    if (got(5) /= rank * 1000 + 5 + i) stop 4
  end do
  one = 1
  call MPI_Win_lock(MPI_LOCK_SHARED, other, 0, win)
  call MPI_Accumulate(one, 1, MPI_DOUBLE_PRECISION, other, disp, 1, MPI_DOUBLE_PRECISION, MPI_SUM, win)
  call MPI_Fetch_and_op(one, old, MPI_DOUBLE_PRECISION, other, disp + 1, MPI_SUM, win, ierr)
  call MPI_Win_unlock(other, win)
  call MPI_Win_lock_all(0, win)
  call MPI_Rput(mine, 10, MPI_DOUBLE_PRECISION, other, disp + 10, 10, MPI_DOUBLE_PRECISION, win, req)
  call MPI_Wait(req, MPI_STATUS_IGNORE)
  call MPI_Win_flush(other, win)
  call MPI_Win_unlock_all(win, ierr)
  call MPI_Win_free(win)
  call MPI_Finalize()
end program
"""

# MPI 4 persistent collectives from Fortran (Open MPI 5, MPICH 4; not Open MPI 4.1, whose
# Fortran has only the MPIX_ forms): three requests started 3 times together, the Allreduce once
# more alone.
PROGRAM_PCOLL = """
program app
  use mpi
  implicit none
  integer :: ierr, rank, i, reqs(3)
  double precision :: x(4), y(4), z(3), g(4)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = rank + 1
  z = rank + 5
  call MPI_Allreduce_init(x, y, 4, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, reqs(1), ierr)
  call MPI_Bcast_init(z, 3, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, MPI_INFO_NULL, reqs(2), ierr)
  call MPI_Allgather_init(x, 2, MPI_DOUBLE_PRECISION, g, 2, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, &
                          MPI_INFO_NULL, reqs(3), ierr)
  do i = 1, 3
    call MPI_Startall(3, reqs, ierr)
    call MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE, ierr)
  end do
  call MPI_Start(reqs(1), ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  if (y(1) /= 3 .or. z(1) /= 5 .or. g(3) /= 2) stop 3
  do i = 1, 3
    call MPI_Request_free(reqs(i), ierr)
  end do
  call MPI_Finalize(ierr)
end program
"""

# The same with Open MPI 4's MPIX_ names (its pcollreq extension; called without an interface).
PROGRAM_PCOLLX = PROGRAM_PCOLL.replace("call MPI_Allreduce_init", "call MPIX_Allreduce_init").replace(
    "call MPI_Bcast_init", "call MPIX_Bcast_init").replace("call MPI_Allgather_init", "call MPIX_Allgather_init")

# Neighbourhood collectives from Fortran (Open MPI's Fortran goes to PMPI_Neighbor_allgather ...
# directly) on a graph of two ranks, each the other's one neighbour (MPI_Dist_graph_create_adjacent:
# MPICH 4.0's mpi_f08 Neighbor_alltoallw fails on a cartesian communicator), three rounds: the
# five blocking ones, the five non-blocking ones completed by one MPI_Waitall, and an MPI_Alltoallw
# of one integer to rank 0 and three doubles to rank 1. The count arrays `one` of Neighbor_alltoallv
# and _alltoallw are longer than the one neighbour: their second entry (1000) is never read. NEIGH_DECL,
# NEIGH_SETUP are shared with the persistent program below.
NEIGH_DECL = """
  integer :: one(2), two(2), three(2), at(2), at3(2), d01(2), peer(1), wcounts(2), wdispls(2), rcounts(2), rdispls(2)
  integer :: ti(2), to(2), tv(2), tw(2)
  integer(kind=MPI_ADDRESS_KIND) :: bytes_at(2)
  double precision :: x(3), nb(4), nbv(6), w(4), wr(8)
"""
NEIGH_SETUP = """
  peer = 1 - rank
  call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, peer, MPI_UNWEIGHTED, 1, peer, MPI_UNWEIGHTED, &
                                      MPI_INFO_NULL, .false., line, ierr)
  one = (/ 1, 1000 /)
  two = 2
  three = 3
  at = (/ 0, 2 /)
  at3 = (/ 0, 3 /)
  d01 = (/ 0, 1 /)
  bytes_at = (/ 0, 4 /)
  ints = MPI_INTEGER
  ti = rank
  x = rank
  wcounts = (/ 1, 3 /)
  wdispls = (/ 0, 8 /)
  wtypes = (/ MPI_INTEGER, MPI_DOUBLE_PRECISION /)
  rcounts = wcounts(rank + 1)
  rtypes = wtypes(rank + 1)
  rdispls = (/ 0, merge(8, 24, rank == 0) /)
"""
NEIGH_ROUNDS = """
  do i = 1, 3
    w = 0.5d0 + i
    call MPI_Neighbor_allgather(x, 1, MPI_DOUBLE_PRECISION, nb, 1, MPI_DOUBLE_PRECISION, line, ierr)
    call MPI_Neighbor_allgatherv(x, 2, MPI_DOUBLE_PRECISION, nbv, two, at, MPI_DOUBLE_PRECISION, line{e})
    call MPI_Neighbor_alltoall(ti, 1, MPI_INTEGER, to, 1, MPI_INTEGER, line, ierr)
    call MPI_Neighbor_alltoallv(ti, one, d01, MPI_INTEGER, tv, one, d01, MPI_INTEGER, line{e})
    call MPI_Neighbor_alltoallw(ti, one, bytes_at, ints, tw, one, bytes_at, ints, line, ierr)
    if (nbv(1) /= 1 - rank) stop 3
    call MPI_Ineighbor_allgather(x, 1, MPI_DOUBLE_PRECISION, nb, 1, MPI_DOUBLE_PRECISION, line, reqs(1), ierr)
    call MPI_Ineighbor_allgatherv(x, 2, MPI_DOUBLE_PRECISION, nbv, two, at, MPI_DOUBLE_PRECISION, line, reqs(2){e})
    call MPI_Ineighbor_alltoall(ti, 1, MPI_INTEGER, to, 1, MPI_INTEGER, line, reqs(3), ierr)
    call MPI_Ineighbor_alltoallv(ti, one, d01, MPI_INTEGER, tv, one, d01, MPI_INTEGER, line, reqs(4){e})
    call MPI_Ineighbor_alltoallw(ti, one, bytes_at, ints, tw, one, bytes_at, ints, line, reqs(5), ierr)
    call MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE, ierr)
    call MPI_Alltoallw(w, wcounts, wdispls, wtypes, wr, rcounts, rdispls, rtypes, MPI_COMM_WORLD{e})
    if (rank == 1 .and. wr(6) /= 0.5d0 + i) stop 4
  end do
  call MPI_Comm_free(line, ierr)
  call MPI_Finalize(ierr)
end program
"""
PROGRAM_NEIGH = """
program app
  use mpi
  implicit none
  integer :: ierr, rank, i, line, reqs(5), ints(2), wtypes(2), rtypes(2)
""" + NEIGH_DECL + """
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
""" + NEIGH_SETUP + NEIGH_ROUNDS.format(e=", ierr")

# The same through mpi_f08, ierror left out of some calls.
PROGRAM_NEIGH_F08 = """
program app
  use mpi_f08
  implicit none
  integer :: ierr, rank, i
  type(MPI_Comm) :: line
  type(MPI_Request) :: reqs(5)
  type(MPI_Datatype) :: ints(2), wtypes(2), rtypes(2)
""" + NEIGH_DECL + """
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
""" + NEIGH_SETUP + NEIGH_ROUNDS.format(e="")

# MPI 4 persistent neighbourhood collectives and MPI_Alltoallw_init from Fortran (MPICH 4, Open MPI
# 5; not Open MPI 4.1, whose Fortran has only the MPIX_ forms), on the same graph, started 3 times.
PROGRAM_PNEIGH = """
program app
  use mpi
  implicit none
  integer :: ierr, rank, i, line, reqs(6), ints(2), wtypes(2), rtypes(2)
""" + NEIGH_DECL + """
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
""" + NEIGH_SETUP + """
  call MPI_Neighbor_allgather_init(x, 2, MPI_DOUBLE_PRECISION, nb, 2, MPI_DOUBLE_PRECISION, line, MPI_INFO_NULL, &
                                   reqs(1), ierr)
  call MPI_Neighbor_allgatherv_init(x, 3, MPI_DOUBLE_PRECISION, nbv, three, at3, MPI_DOUBLE_PRECISION, line, &
                                    MPI_INFO_NULL, reqs(2), ierr)
  call MPI_Neighbor_alltoall_init(ti, 1, MPI_INTEGER, to, 1, MPI_INTEGER, line, MPI_INFO_NULL, reqs(3), ierr)
  call MPI_Neighbor_alltoallv_init(ti, one, d01, MPI_INTEGER, tv, one, d01, MPI_INTEGER, line, MPI_INFO_NULL, &
                                   reqs(4), ierr)
  call MPI_Neighbor_alltoallw_init(ti, one, bytes_at, ints, tw, one, bytes_at, ints, line, MPI_INFO_NULL, &
                                   reqs(5), ierr)
  call MPI_Alltoallw_init(w, wcounts, wdispls, wtypes, wr, rcounts, rdispls, rtypes, MPI_COMM_WORLD, &
                          MPI_INFO_NULL, reqs(6), ierr)
  do i = 1, 3
    w = 0.5d0 + i
    call MPI_Startall(6, reqs, ierr)
    call MPI_Waitall(6, reqs, MPI_STATUSES_IGNORE, ierr)
    if (nbv(3) /= 1 - rank) stop 3
    if (rank == 1 .and. wr(6) /= 0.5d0 + i) stop 4
  end do
  do i = 1, 6
    call MPI_Request_free(reqs(i), ierr)
  end do
  call MPI_Comm_free(line, ierr)
  call MPI_Finalize(ierr)
end program
"""


def _build(mpi_setup, d, name, source, lacking=None):
    """The program built with the MPI's Fortran wrapper; skipped where there is none, or where the
    link misses `lacking` (a feature this MPI's Fortran does not have)."""
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
    if r.returncode != 0 and name.endswith("_f08") and "mpi_f08" in r.stderr:
        pytest.skip(f"this MPI has no mpi_f08 module: {r.stderr.strip()[:200]}")
    if r.returncode != 0 and lacking and lacking in r.stderr and "undefined" in r.stderr:   # ld's, lld's words
        pytest.skip(f"this MPI's Fortran has no {lacking}: {r.stderr.strip()[:200]}")
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
    check_calls(json.loads(out.read_text())["application"]["profile"]["mpi"])


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
    check_io(json.loads(out.read_text())["application"]["profile"], data)


@pytest.fixture(scope="module", params=["app_p", "app_p_f08"])
def fortran_p_rma(mpi_setup, tmp_path_factory, request):
    d = tmp_path_factory.mktemp("fprma")
    return _build(mpi_setup, d, request.param, PROGRAM_P_RMA if request.param == "app_p" else PROGRAM_P_RMA_F08)


def _profile(built, tmp_path):
    exe, found, tmp = built
    out = tmp_path / "p.json"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = run_or_show([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json", str(out),
                     "--", *found["argv2"], str(exe)], env)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())["application"]["profile"]["mpi"]


@needs_mpi
@NEEDS_LIB
def test_fortran_persistent_requests_and_one_sided_calls_are_counted_under_their_c_names(fortran_p_rma, tmp_path):
    check_p_rma(_profile(fortran_p_rma, tmp_path))


def check_p_rma(mpi):
    """PROGRAM_P_RMA's and PROGRAM_P_RMA_F08's calls, to the call and the byte."""
    assert mpi["ranks"] == 2
    fns = {f["fn"]: f for f in mpi["functions"]}

    def calls_bytes(name):
        return fns[name]["calls"], fns[name]["bytes"]
    # persistent requests, both ranks: each start counts what its Fortran init set
    assert calls_bytes("MPI_Startall") == (2 * 4, 2 * 4 * (800 + 800))
    assert calls_bytes("MPI_Start") == (2 * 4, 2 * 2 * (160 + 160))
    # one-sided: the origin's bytes; the synchronisation calls by name
    assert calls_bytes("MPI_Put") == (2 * 3, 2 * 3 * 8000) and calls_bytes("MPI_Get") == (2 * 3, 2 * 3 * 800)
    assert calls_bytes("MPI_Accumulate") == (2, 16) and calls_bytes("MPI_Fetch_and_op") == (2, 16)
    assert calls_bytes("MPI_Rput") == (2, 2 * 80)
    for name, n in (("MPI_Win_fence", 9), ("MPI_Win_lock", 1), ("MPI_Win_unlock", 1), ("MPI_Win_lock_all", 1),
                    ("MPI_Win_unlock_all", 1), ("MPI_Win_flush", 1)):
        assert fns[name]["calls"] == 2 * n, (name, fns[name])
    for rank in mpi["per_rank"]:
        c, me = rank["classes"], rank["rank"]
        assert c["post"]["calls"] == 8 and c["post"]["bytes"] == 4 * 1600 + 2 * 320, c
        assert c["rma"]["calls"] == 3 + 3 + 1 + 1 + 1 and c["rma"]["bytes"] == 24000 + 2400 + 8 + 8 + 80, c
        assert c["rma_sync"]["calls"] == 9 + 5 and c["wait"]["calls"] == 4 + 2 + 1, c
        peers = {int(k): v for k, v in rank["peers"].items()}
        assert peers == {1 - me: {"calls": 4 + 2, "bytes": 4 * 800 + 2 * 160}}     # the sends started
    # the posting histogram: every request started and every one-sided transfer, by its own bytes
    assert sum(mpi["hist"]["post"]["hist_bytes"]) == 2 * (4 * 1600 + 2 * 320 + 24000 + 2400 + 8 + 8 + 80)


@needs_mpi
@NEEDS_LIB
def test_fortran_persistent_collectives_are_counted_at_each_start(mpi_setup, tmp_path_factory, tmp_path):
    built = _build(mpi_setup, tmp_path_factory.mktemp("fpcoll"), "app_pcoll", PROGRAM_PCOLL,
                   lacking="mpi_allreduce_init")
    check_pcoll(_profile(built, tmp_path))


@needs_mpi
@NEEDS_LIB
def test_fortran_open_mpi_4_mpix_persistent_collectives_are_counted_under_their_own_names(
        mpi_setup, tmp_path_factory, tmp_path):
    """Open MPI 4's pcollreq extension (MPIX_Allreduce_init ...), the MPI 4 calls before MPI 4."""
    built = _build(mpi_setup, tmp_path_factory.mktemp("fpcollx"), "app_pcollx", PROGRAM_PCOLLX,
                   lacking="mpix_allreduce_init")
    check_pcoll(_profile(built, tmp_path), "MPIX_")


def check_pcoll(mpi, pre="MPI_"):
    """PROGRAM_PCOLL's starts, under each init's C name, with the blocking form's bytes; the
    MPI_Startall and MPI_Start of collectives alone are counted under theirs only."""
    fns = {f["fn"]: f for f in mpi["functions"]}
    assert (fns[pre + "Allreduce_init"]["calls"], fns[pre + "Allreduce_init"]["bytes"]) == (2 * 4, 2 * 4 * 32)
    assert (fns[pre + "Bcast_init"]["calls"], fns[pre + "Bcast_init"]["bytes"]) == (2 * 3, 2 * 3 * 24)
    assert (fns[pre + "Allgather_init"]["calls"], fns[pre + "Allgather_init"]["bytes"]) == (2 * 3, 2 * 3 * 16)
    assert not {"MPI_Startall", "MPI_Start"} & set(fns), fns
    for rank in mpi["per_rank"]:
        assert rank["classes"]["icoll"]["calls"] == 10 and rank["classes"]["icoll"]["bytes"] == 4 * 32 + 3 * 24 + 3 * 16


@pytest.fixture(scope="module", params=["app_nb", "app_nb_f08"])
def fortran_neigh(mpi_setup, tmp_path_factory, request):
    d = tmp_path_factory.mktemp("fneigh")
    return _build(mpi_setup, d, request.param, PROGRAM_NEIGH if request.param == "app_nb" else PROGRAM_NEIGH_F08)


@needs_mpi
@NEEDS_LIB
def test_fortran_neighbourhood_collectives_and_alltoallw_are_counted_under_their_c_names(fortran_neigh, tmp_path):
    check_neigh(_profile(fortran_neigh, tmp_path))


def check_neigh(mpi):
    """PROGRAM_NEIGH's and PROGRAM_NEIGH_F08's calls: the bytes the C wrappers count (the block
    sent; the count-array neighbourhood forms' mean block over the graph's out-degree, 1: one
    integer, where the communicator's size would read the entry past it; Alltoallw's mean block,
    (4 + 24) / 2)."""
    fns = {f["fn"]: f for f in mpi["functions"]}
    per_call = {"MPI_Neighbor_allgather": 8, "MPI_Neighbor_allgatherv": 16, "MPI_Neighbor_alltoall": 4,
                "MPI_Neighbor_alltoallv": 4, "MPI_Neighbor_alltoallw": 4, "MPI_Ineighbor_allgather": 8,
                "MPI_Ineighbor_allgatherv": 16, "MPI_Ineighbor_alltoall": 4, "MPI_Ineighbor_alltoallv": 4,
                "MPI_Ineighbor_alltoallw": 4, "MPI_Alltoallw": 14}
    for name, b in per_call.items():                      # 2 ranks, 3 calls each
        assert (fns.get(name, {}).get("calls"), fns.get(name, {}).get("bytes")) == (6, 6 * b), (name, fns.get(name))
    assert sum(mpi["hist"]["coll"]["hist"]) == 2 * 3 * 6   # the blocking ones
    for rank in mpi["per_rank"]:
        c = rank["classes"]
        assert (c["coll"]["calls"], c["coll"]["bytes"]) == (3 * 6, 3 * (8 + 16 + 4 + 4 + 4 + 14)), c
        assert (c["icoll"]["calls"], c["icoll"]["bytes"]) == (3 * 5, 3 * (8 + 16 + 4 + 4 + 4)), c
        assert c["wait"]["calls"] == 3, c


@needs_mpi
@NEEDS_LIB
def test_fortran_persistent_neighbourhood_collectives_are_counted_at_each_start(mpi_setup, tmp_path_factory,
                                                                               tmp_path):
    built = _build(mpi_setup, tmp_path_factory.mktemp("fpneigh"), "app_pnb", PROGRAM_PNEIGH,
                   lacking="mpi_neighbor_allgather_init")
    check_pneigh(_profile(built, tmp_path))


def check_pneigh(mpi):
    """PROGRAM_PNEIGH's starts, under each init's C name, with the blocking form's bytes."""
    fns = {f["fn"]: f for f in mpi["functions"]}
    per_start = {"MPI_Neighbor_allgather_init": 16, "MPI_Neighbor_allgatherv_init": 24,
                 "MPI_Neighbor_alltoall_init": 4, "MPI_Neighbor_alltoallv_init": 4, "MPI_Neighbor_alltoallw_init": 4,
                 "MPI_Alltoallw_init": 14}
    for name, b in per_start.items():                     # 2 ranks, 3 starts each
        assert (fns.get(name, {}).get("calls"), fns.get(name, {}).get("bytes")) == (6, 6 * b), (name, fns.get(name))
    assert "MPI_Startall" not in fns, fns["MPI_Startall"]     # of collectives alone: counted under theirs
    for rank in mpi["per_rank"]:
        icoll = rank["classes"]["icoll"]
        assert icoll["calls"] == 18 and icoll["bytes"] == 3 * (16 + 24 + 4 + 4 + 4 + 14)


# MPICH's own Fortran (its Fortran layer calls the C names; MPI_F_STATUS_IGNORE is set only when
# that layer starts), where Debian's mpich package is installed beside whatever mpi4py loads: the
# MPICH wheel has no Fortran. Skipped elsewhere (CI).
MPICH_FC, MPICH_RUN = shutil.which("mpif90.mpich"), shutil.which("mpiexec.mpich")


@NEEDS_LIB
@pytest.mark.skipif(not (MPICH_FC and MPICH_RUN), reason="no mpif90.mpich / mpiexec.mpich (Debian's mpich package)")
@pytest.mark.parametrize("name", ["app", "app_f08", "app_io", "app_p", "app_p_f08", "app_pcoll", "app_nb",
                                  "app_nb_f08", "app_pnb"])
def test_mpichs_own_fortran_is_counted_alike(tmp_path, name):
    src = {"app": PROGRAM, "app_f08": PROGRAM_F08, "app_io": PROGRAM_IO, "app_p": PROGRAM_P_RMA,
           "app_p_f08": PROGRAM_P_RMA_F08, "app_pcoll": PROGRAM_PCOLL, "app_nb": PROGRAM_NEIGH,
           "app_nb_f08": PROGRAM_NEIGH_F08, "app_pnb": PROGRAM_PNEIGH}[name]
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
    prof = json.loads(out.read_text())["application"]["profile"]
    assert prof["mpi"]["family"] == "mpich"
    check = {"app_io": None, "app_p": check_p_rma, "app_p_f08": check_p_rma, "app_pcoll": check_pcoll,
             "app_nb": check_neigh, "app_nb_f08": check_neigh, "app_pnb": check_pneigh}.get(name, check_calls)
    if check is None:
        check_io(prof, data)
    else:
        check(prof["mpi"])


# MPI_F_sync_reg(buf) as a Fortran program calls it, buffer alone: the second argument register holds
# what the previous call left there, here a value that is no address (0x8b: what the MPI_Win_fence
# wrapper left once the trace's hook was in, and app_p died in MPICH 4.0's pmpi_f_sync_reg__, which
# stores an ierror through it).
SYNC_REG_C = r"""
void mpi_f_sync_reg_(void *buf, void *leftover);
int main(void)
{
    double got[4] = {0};
    mpi_f_sync_reg_(got, (void *)0x8b);
    return got[0] != 0;
}
"""
MPICH_CC = shutil.which("mpicc.mpich")


@NEEDS_LIB
@pytest.mark.skipif(not MPICH_CC, reason="no mpicc.mpich (Debian's mpich package, with its Fortran library)")
def test_mpi_f_sync_reg_never_lets_the_library_write_through_a_register_it_was_not_given(tmp_path):
    from test_interpose import LIB
    (tmp_path / "sync_reg.c").write_text(SYNC_REG_C)
    r = subprocess.run([MPICH_CC, "-o", "sync_reg", "sync_reg.c", "-lmpichfort"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0 and "mpichfort" in r.stderr:
        pytest.skip(f"this MPICH has no Fortran library: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr
    env = dict(os.environ, LD_PRELOAD=str(LIB), CEILING_INTERPOSE_OUT=str(tmp_path / "rec.%p"))
    r = subprocess.run([str(tmp_path / "sync_reg")], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)


COMM_PROGRAM = """
program comms
  use mpi
  implicit none
  integer :: rank, s, ierr, buf(10), sub, dup, req
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, sub, ierr)   ! backwards: sub rank 0 is world 1
  call MPI_Comm_rank(sub, s, ierr)
  buf = 0
  if (s == 0) then
    call MPI_Send(buf, 10, MPI_INTEGER, 1, 3, sub, ierr)
  else
    call MPI_Recv(buf, 10, MPI_INTEGER, 0, 3, sub, MPI_STATUS_IGNORE, ierr)
  end if
  call MPI_Comm_idup(sub, dup, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  if (s == 0) then
    call MPI_Send(buf, 5, MPI_INTEGER, 1, 4, dup, ierr)
  else
    call MPI_Recv(buf, 5, MPI_INTEGER, 0, 4, dup, MPI_STATUS_IGNORE, ierr)
  end if
  call MPI_Comm_free(dup, ierr)
  call MPI_Comm_free(sub, ierr)
  call MPI_Finalize(ierr)
end program
"""


@needs_mpi
@NEEDS_LIB
def test_a_fortran_programs_own_communicators_name_their_peers_by_world_rank(mpi_setup, tmp_path_factory, tmp_path):
    """Open MPI's Fortran makes a communicator with the PMPI call itself (no C wrapper sees it): the
    Fortran wrappers note it (csrc/interpose/mpi_fortran_comm.c), so that world 1's sends on a backwards
    split, and on its MPI_Comm_idup, are counted to world 0, not to an unknown peer."""
    built = _build(mpi_setup, tmp_path_factory.mktemp("fcomm"), "comms", COMM_PROGRAM)
    mpi = _profile(built, tmp_path)
    peers = {r["rank"]: {int(k): v for k, v in r["peers"].items()} for r in mpi["per_rank"]}
    assert peers[1] == {0: {"calls": 2, "bytes": 60}}, peers
    assert peers[0] == {}, peers
