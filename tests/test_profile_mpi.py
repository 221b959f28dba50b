"""The MPI part of `ceiling profile`: the interposer's MPI module counted to the call
and the byte in a real MPI program (built with the mpicc of the library mpi4py
loaded, run with its launcher: MPICH in the default pass, Open MPI in CI's second),
and the bound of programs built to have one: ping-pong of 8 bytes (MPI latency),
of 4 MiB (MPI bandwidth), one rank working four times as long (imbalance). The
analysis itself is also checked on records written by hand. No timings are
asserted: only which class dominates a program that can only be in one."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ceiling.analysis.profile_mpi import conclude as mpi_conclude
from ceiling.probes.interpose_record import latest, parse
from ceiling.verbs.profile import launched_rank
from mpiutil import build_mpi, needs_mpi, run_env
from test_interpose import NEEDS_LIB

APP = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
/* MPI 4's persistent collectives and partitioned calls under their own names: MPI 4, and Open MPI 5,
   which has them while its header says MPI 3.1 (without the large-count _c forms) */
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define MPI4_CALLS 1
#endif
#ifdef MPI4_CALLS                           /* persistent collectives: MPI 4, or Open MPI 4's extension */
#define PC(x) MPI_##x
#define PC_PREFIX "MPI_"
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define PC(x) MPIX_##x
#define PC_PREFIX "MPIX_"
#endif
#define CHECK(x) do { if (!(x)) { fprintf(stderr, "check failed: %s\n", #x); MPI_Abort(MPI_COMM_WORLD, 9); } } while (0)

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static void busy(double s) { double t = now(); volatile double x = 1; while (now() - t < s) x *= 1.0000001; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2);
    const char *mode = argv[1];
    long n = atol(argv[2]), bytes = atol(argv[3]);
    char *buf = calloc(1, bytes > 0 ? bytes : 1);
    if (!strcmp(mode, "pingpong")) {           /* n round trips of `bytes`, checked */
        for (long i = 0; i < n; i++) {
            if (rank == 0) {
                buf[0] = (char)i;
                MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)bytes, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                CHECK(buf[0] == (char)(i + 1));
            } else {
                MPI_Status st;
                MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &st);
                buf[0]++;
                MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
            }
        }
    } else if (!strcmp(mode, "imbalance")) {   /* n steps: rank 0 works 4x as long, then all meet */
        for (long i = 0; i < n; i++) {
            busy(rank == 0 ? 0.04 : 0.01);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    } else if (!strcmp(mode, "writer")) {     /* rank 0 writes n MiB in 1 MiB writes, rank 1 waits */
        if (rank == 0) {
            FILE *f = fopen(argv[4], "wb");
            CHECK(f != NULL);
            char *mib = calloc(1, 1 << 20);
            for (long i = 0; i < n; i++)
                CHECK(fwrite(mib, 1, 1 << 20, f) == 1 << 20);
            CHECK(fclose(f) == 0);
            free(mib);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(mode, "onesided")) {    /* n rounds of put / fence / get / fence; a lock epoch;
                                                  persistent sends; neighbourhood collectives */
        double *win_buf = calloc(1000, sizeof(double)), mine[1000], got[1000];
        MPI_Win win;
        MPI_Win_create(win_buf, 1000 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        int other = 1 - rank;
        for (long i = 0; i < n; i++) {
            for (int k = 0; k < 1000; k++)
                mine[k] = rank * 1000 + k + i;
            MPI_Win_fence(0, win);
            MPI_Put(mine, 1000, MPI_DOUBLE, other, 0, 1000, MPI_DOUBLE, win);
            MPI_Win_fence(0, win);
            MPI_Get(got, 100, MPI_DOUBLE, other, 0, 100, MPI_DOUBLE, win);
            MPI_Win_fence(0, win);
            CHECK(got[5] == rank * 1000 + 5 + i);      /* what the other rank put into its own window: ours */
        }
        double one = 1, old = 0;
        MPI_Win_lock(MPI_LOCK_SHARED, other, 0, win);
        MPI_Accumulate(&one, 1, MPI_DOUBLE, other, 0, 1, MPI_DOUBLE, MPI_SUM, win);
        MPI_Fetch_and_op(&one, &old, MPI_DOUBLE, other, 1, MPI_SUM, win);
        MPI_Win_unlock(other, win);
        MPI_Win_free(&win);
        free(win_buf);
        MPI_Request rq[2];
        MPI_Send_init(mine, 10, MPI_DOUBLE, other, 3, MPI_COMM_WORLD, &rq[0]);
        MPI_Recv_init(got, 10, MPI_DOUBLE, other, 3, MPI_COMM_WORLD, &rq[1]);
        for (int k = 0; k < 3; k++) {
            MPI_Startall(2, rq);
            MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        }
        MPI_Request_free(&rq[0]);
        MPI_Request_free(&rq[1]);
        /* new persistent requests, maybe on the freed handles: started one by one */
        MPI_Send_init(mine, 20, MPI_DOUBLE, other, 4, MPI_COMM_WORLD, &rq[0]);
        MPI_Recv_init(got, 20, MPI_DOUBLE, other, 4, MPI_COMM_WORLD, &rq[1]);
        MPI_Start(&rq[1]);
        MPI_Start(&rq[0]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        MPI_Request_free(&rq[0]);
        MPI_Request_free(&rq[1]);
        MPI_Comm ring;
        int dims[1] = {2}, periods[1] = {0};
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
        double nb[2];
        MPI_Neighbor_allgather(mine, 1, MPI_DOUBLE, nb, 1, MPI_DOUBLE, ring);
        MPI_Neighbor_alltoall(mine, 1, MPI_DOUBLE, nb, 1, MPI_DOUBLE, ring);
        MPI_Comm_free(&ring);
    } else if (!strcmp(mode, "pcoll")) {       /* n rounds of MPI 4 persistent collectives, with a persistent
                                                  send and receive in the same MPI_Startall */
#ifdef PC
        int other = 1 - rank, ints[2] = {rank, rank + 10}, ints_out[1], all[2];
        double x[4] = {1, 2, 3, rank}, y[4], g[8] = {0}, sent[10] = {0}, got[10];
        float f[5] = {0}, fg[10];
        short sh[12] = {0}, sh_in[6];
        char bc[1000];
        MPI_Request rq[12];
        if (rank == 0)
            printf("persistent collectives as %s\n", PC_PREFIX);
        /* bytes per start, as the blocking forms count them: */
        PC(Bcast_init)(bc, 1000, MPI_BYTE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]);       /* 1000 */
        PC(Allreduce_init)(x, y, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]);  /* 32 */
        MPI_Send_init(sent, 10, MPI_DOUBLE, other, 5, MPI_COMM_WORLD, &rq[2]);                /* 80, p2p */
        MPI_Recv_init(got, 10, MPI_DOUBLE, other, 5, MPI_COMM_WORLD, &rq[3]);                 /* 80, p2p */
        PC(Reduce_init)(x, y, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[4]);  /* 24 */
        PC(Allgather_init)(x, 2, MPI_DOUBLE, g, 2, MPI_DOUBLE, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[5]);  /* 16 */
        PC(Alltoall_init)(ints, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[6]);    /* 4 */
        PC(Gather_init)(f, 5, MPI_FLOAT, fg, 5, MPI_FLOAT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[7]);   /* 20 */
        PC(Scatter_init)(sh, 6, MPI_SHORT, sh_in, 6, MPI_SHORT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[8]); /* 12 */
        PC(Reduce_scatter_block_init)(ints, ints_out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL,
                                      &rq[9]);                                                 /* 4 */
        PC(Barrier_init)(MPI_COMM_WORLD, MPI_INFO_NULL, &rq[10]);                              /* 0 */
        PC(Allreduce_init)(MPI_IN_PLACE, g, 8, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[11]); /* 64 */
        for (long i = 0; i < n; i++) {
            bc[0] = rank == 0 ? (char)(i + 1) : 0;
            MPI_Startall(4, rq);                                 /* Bcast, Allreduce, and the send and receive */
            MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
            CHECK(bc[0] == (char)(i + 1) && y[0] == 2 && y[3] == 1);
            for (int k = 4; k < 12; k++) {                       /* the others one by one */
                MPI_Start(&rq[k]);
                MPI_Wait(&rq[k], MPI_STATUS_IGNORE);
            }
            CHECK(g[2] == 1 && all[1] == (rank == 0 ? 1 : 11) && ints_out[0] == (rank == 0 ? 1 : 21));
        }
        for (int k = 0; k < 12; k++)
            MPI_Request_free(&rq[k]);
#else
        if (rank == 0)
            printf("no MPI 4 persistent collectives in this MPI's header\n");
#endif
    } else if (!strcmp(mode, "neigh")) {       /* n rounds of Alltoallw, and of the neighbourhood collectives
                                                  onesided leaves out on a line of two ranks, a 2 x 1 grid
                                                  and a distributed graph */
        MPI_Comm line, grid, graph;
        int dims[1] = {2}, periods[1] = {0}, one[2] = {1, 1}, two[2] = {2, 2}, at[2] = {0, 2};
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &line);
        /* the grid: four neighbours, those of its second dimension MPI_PROC_NULL; one int to the other
           rank, five to each of those */
        int gdims[2] = {2, 1}, gperiods[2] = {0, 0}, gcounts[4] = {1, 1, 5, 5}, gdispls[4] = {0, 1, 2, 7};
        int gin[12], gout[12];
        MPI_Cart_create(MPI_COMM_WORLD, 2, gdims, gperiods, 0, &grid);
        /* the graph: one neighbour each way, the other rank; three ints to it (the count array's second
           entry is past the neighbour list: never read) */
        int other = 1 - rank, dcounts[2] = {3, 1000}, ddispls[1] = {0}, din[3], dout[3];
        MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &other, MPI_UNWEIGHTED, 1, &other, MPI_UNWEIGHTED,
                                       MPI_INFO_NULL, 0, &graph);
        /* Alltoallw: one int to rank 0 (at byte 0), three doubles to rank 1 (at byte 8) */
        double w[4], wr[8];
        int wcounts[2] = {1, 3}, wdispls[2] = {0, 8}, rcounts[2], rdispls[2] = {0, rank == 0 ? 8 : 24};
        MPI_Datatype wtypes[2] = {MPI_INT, MPI_DOUBLE}, rtypes[2];
        rcounts[0] = rcounts[1] = wcounts[rank];
        rtypes[0] = rtypes[1] = wtypes[rank];
        double x[2] = {rank, rank}, nb[4], nbv[4];
        int ti[2] = {rank, rank}, to[2], tw[2];
        MPI_Aint bytes_at[2] = {0, sizeof(int)};
        MPI_Datatype ints[2] = {MPI_INT, MPI_INT};
        MPI_Request rq[5];
        for (long i = 0; i < n; i++) {
            *(int *)w = 100 + (int)i;
            w[1] = w[2] = w[3] = 0.5 + i;
            MPI_Alltoallw(w, wcounts, wdispls, wtypes, wr, rcounts, rdispls, rtypes, MPI_COMM_WORLD);  /* 14 */
            CHECK(rank == 0 ? *(int *)((char *)wr + 8) == 100 + i : wr[5] == 0.5 + i);
            MPI_Neighbor_alltoallw(ti, one, bytes_at, ints, tw, one, bytes_at, ints, line);           /* 4 */
            for (int k = 0; k < 12; k++)
                gout[k] = 10 * rank + k + (int)i;
            MPI_Neighbor_alltoallv(gout, gcounts, gdispls, MPI_INT, gin, gcounts, gdispls, MPI_INT, grid); /* 12 */
            CHECK(gin[rank == 0 ? 1 : 0] == 10 * other + (rank == 0 ? 0 : 1) + i);
            for (int k = 0; k < 3; k++)
                dout[k] = 100 * rank + k + (int)i;
            MPI_Ineighbor_allgather(x, 1, MPI_DOUBLE, nb, 1, MPI_DOUBLE, line, &rq[0]);                /* 8 */
            MPI_Ineighbor_allgatherv(x, 2, MPI_DOUBLE, nbv, two, at, MPI_DOUBLE, line, &rq[1]);        /* 16 */
            MPI_Ineighbor_alltoall(ti, 1, MPI_INT, to, 1, MPI_INT, line, &rq[2]);                      /* 4 */
            MPI_Ineighbor_alltoallv(dout, dcounts, ddispls, MPI_INT, din, dcounts, ddispls, MPI_INT, graph,
                                    &rq[3]);                                                           /* 12 */
            MPI_Ineighbor_alltoallw(ti, one, bytes_at, ints, tw, one, bytes_at, ints, line, &rq[4]);  /* 4 */
            MPI_Waitall(5, rq, MPI_STATUSES_IGNORE);
            CHECK(nbv[rank == 0 ? 2 : 0] == 1 - rank);       /* the one neighbour's block */
            CHECK(din[2] == 100 * other + 2 + i);
        }
        MPI_Comm_free(&line);
        MPI_Comm_free(&grid);
        MPI_Comm_free(&graph);
    } else if (!strcmp(mode, "pneigh")) {      /* n rounds of MPI 4 persistent neighbourhood collectives and
                                                  Alltoallw_init, then n of a partitioned send and receive */
#ifdef MPI4_CALLS
        MPI_Comm line;
        int dims[1] = {2}, periods[1] = {0}, one[2] = {1, 1}, three[2] = {3, 3}, at[2] = {0, 3}, d01[2] = {0, 1};
        int other = 1 - rank;
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &line);
        double x[3] = {rank, rank, rank}, nb[4], nbv[6], xo[2], w[4], wr[8];
        int ti[2] = {rank, rank}, to[2], tv[2], tw[2];
        MPI_Aint bytes_at[2] = {0, sizeof(int)};
        MPI_Datatype ints[2] = {MPI_INT, MPI_INT};
        int wcounts[2] = {1, 3}, wdispls[2] = {0, 8}, rcounts[2], rdispls[2] = {0, rank == 0 ? 8 : 24};
        MPI_Datatype wtypes[2] = {MPI_INT, MPI_DOUBLE}, rtypes[2];
        rcounts[0] = rcounts[1] = wcounts[rank];
        rtypes[0] = rtypes[1] = wtypes[rank];
        MPI_Request rq[7];
        /* bytes per start, as the blocking forms count them: */
        MPI_Neighbor_allgather_init(x, 2, MPI_DOUBLE, nb, 2, MPI_DOUBLE, line, MPI_INFO_NULL, &rq[0]);        /* 16 */
        MPI_Neighbor_allgatherv_init(x, 3, MPI_DOUBLE, nbv, three, at, MPI_DOUBLE, line, MPI_INFO_NULL,
                                     &rq[1]);                                                                  /* 24 */
        MPI_Neighbor_alltoall_init(ti, 1, MPI_INT, to, 1, MPI_INT, line, MPI_INFO_NULL, &rq[2]);               /* 4 */
        MPI_Neighbor_alltoallv_init(ti, one, d01, MPI_INT, tv, one, d01, MPI_INT, line, MPI_INFO_NULL, &rq[3]); /* 4 */
        MPI_Neighbor_alltoallw_init(ti, one, bytes_at, ints, tw, one, bytes_at, ints, line, MPI_INFO_NULL,
                                    &rq[4]);                                                                   /* 4 */
        MPI_Alltoallw_init(w, wcounts, wdispls, wtypes, wr, rcounts, rdispls, rtypes, MPI_COMM_WORLD, MPI_INFO_NULL,
                           &rq[5]);                                                                            /* 14 */
        int nreq = 6;
#if MPI_VERSION >= 4
        MPI_Neighbor_alltoall_init_c(x, 1, MPI_DOUBLE, xo, 1, MPI_DOUBLE, line, MPI_INFO_NULL, &rq[nreq++]);   /* 8 */
#else
        if (rank == 0)
            printf("no large-count forms in this MPI's header\n");
#endif
        for (long i = 0; i < n; i++) {
            *(int *)w = 100 + (int)i;
            w[1] = w[2] = w[3] = 0.5 + i;
            MPI_Startall(nreq, rq);
            MPI_Waitall(nreq, rq, MPI_STATUSES_IGNORE);
            CHECK(nbv[rank == 0 ? 5 : 2] == 1 - rank);
            CHECK(rank == 0 ? *(int *)((char *)wr + 8) == 100 + i : wr[5] == 0.5 + i);
        }
        for (int k = 0; k < nreq; k++)
            MPI_Request_free(&rq[k]);
        MPI_Comm_free(&line);
        /* partitioned: 4 partitions of 25 doubles each way (800 bytes a start), made ready in three calls */
        double ps[100], pr[100];
        int last[1] = {3}, flag;
        long polls = 0;
        MPI_Request pq[2];
        MPI_Psend_init(ps, 4, 25, MPI_DOUBLE, other, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &pq[0]);
        MPI_Precv_init(pr, 4, 25, MPI_DOUBLE, other, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &pq[1]);
        for (long i = 0; i < n; i++) {
            for (int k = 0; k < 100; k++)
                ps[k] = rank + i;
            MPI_Startall(2, pq);
            MPI_Pready_range(0, 1, pq[0]);
            MPI_Pready(2, pq[0]);
            MPI_Pready_list(1, last, pq[0]);
            do {
                MPI_Parrived(pq[1], 3, &flag);
                polls++;
            } while (!flag);
            MPI_Waitall(2, pq, MPI_STATUSES_IGNORE);
            CHECK(pr[99] == other + i);
        }
        MPI_Request_free(&pq[0]);
        MPI_Request_free(&pq[1]);
        printf("rank %d parrived %ld\n", rank, polls);
#else
        if (rank == 0)
            printf("no MPI 4 persistent collectives in this MPI's header\n");
#endif
    } else if (!strcmp(mode, "ctrlc")) {       /* once every rank is past MPI_Init, rank 0 stops the job as
                                                  Ctrl-C to the launcher does (its pid: TEST_LAUNCHER_PID) */
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            kill((pid_t)atol(getenv("TEST_LAUNCHER_PID")), SIGINT);
        for (;;) {
            MPI_Barrier(MPI_COMM_WORLD);
            usleep(1000);
        }
    } else if (!strcmp(mode, "mix")) {         /* every counted form once, with known bytes */
        double x = rank, y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        CHECK(y == 1);
        MPI_Request rq[2];
        int other = 1 - rank;
        MPI_Irecv(buf, 100, MPI_BYTE, other, 1, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(buf + 100, 100, MPI_BYTE, other, 1, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        /* a matched probe and receive, as mpi4py receives an object (24 bytes); then the
           non-blocking forms (16), the probe polled */
        MPI_Message msg;
        MPI_Request mq[3];
        int flag = 0;
        MPI_Isend(buf + 200, 24, MPI_BYTE, other, 3, MPI_COMM_WORLD, &mq[0]);
        MPI_Mprobe(other, 3, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE);
        MPI_Mrecv(buf + 300, 24, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        MPI_Isend(buf + 400, 16, MPI_BYTE, other, 4, MPI_COMM_WORLD, &mq[1]);
        while (!flag)
            MPI_Improbe(other, 4, MPI_COMM_WORLD, &flag, &msg, MPI_STATUS_IGNORE);
        MPI_Imrecv(buf + 500, 16, MPI_BYTE, &msg, &mq[2]);
        MPI_Waitall(3, mq, MPI_STATUSES_IGNORE);
        MPI_Bcast(buf, 1000, MPI_BYTE, 0, MPI_COMM_WORLD);
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &half);
        MPI_Sendrecv(buf, 10, MPI_INT, other, 2, buf + 64, 10, MPI_INT, other, 2, half, MPI_STATUS_IGNORE);
        MPI_Comm_free(&half);
        MPI_File fh;
        CHECK(MPI_File_open(MPI_COMM_WORLD, argv[4], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) == 0);
        CHECK(MPI_File_write_at_all(fh, rank * 4096, buf, 4096, MPI_BYTE, MPI_STATUS_IGNORE) == 0);
        CHECK(MPI_File_read_at(fh, rank * 4096, buf, 4096, MPI_BYTE, MPI_STATUS_IGNORE) == 0);
        MPI_File_close(&fh);
    }
    free(buf);
    MPI_Finalize();
    return rank == 0 ? atoi(argv[argc - 1]) : 0;     /* the last argument: rank 0's exit status */
}
"""


@pytest.fixture(scope="module")
def app(mpi_setup, tmp_path_factory):
    tmp, found = mpi_setup
    d = tmp_path_factory.mktemp("mpiapp")
    return build_mpi(found, tmp, d, "app", APP), found, tmp


def profile(app, tmp_path, *args, status=0):
    exe, found, tmp = app
    out = tmp_path / "p.json"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [sys.executable, "-m", "ceiling", "profile", "--no-store", "--save-json", str(out), "--",
           *found["argv2"], str(exe), *args, str(status)]
    r = run_or_show(cmd, env)
    return r, json.loads(out.read_text()) if out.exists() else None


def run_or_show(cmd, env, timeout=180):
    """subprocess.run, but a job that hangs fails with what its processes were doing."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        ps = subprocess.run(["ps", "-eo", "pid,ppid,stat,wchan:24,etime,args"], capture_output=True, text=True).stdout
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"hung for {timeout} s; processes:\n{ps}\nstderr:\n{err}")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def bounds(doc):
    return [b["bound"] for b in doc["analysis"]["bounds"]]


@needs_mpi
@NEEDS_LIB
def test_every_rank_is_counted_to_the_call_and_the_byte(app, tmp_path):
    r, doc = profile(app, tmp_path, "mix", "0", "8192", str(tmp_path / "f"), status=3)
    assert r.returncode == 3, r.stderr                          # rank 0's exit status, through mpiexec
    mpi = doc["application"]["profile"]["mpi"]
    assert mpi["ranks"] == 2 and mpi["size"] == 2 and mpi["family"] in ("mpich", "openmpi")
    for rank in mpi["per_rank"]:
        c = rank["classes"]
        # Irecv posted 100, Isend 100; the matched exchange's Isends 24 and 16, Imrecv 16
        assert c["post"]["calls"] == 5 and c["post"]["bytes"] == 200 + 24 + 16 + 16
        assert c["recv"]["calls"] == 2 and c["recv"]["bytes"] == 24          # Mprobe (time only), Mrecv
        assert c["wait"]["calls"] >= 3                                       # 2 Waitall, Improbe polled
        assert c["coll"]["calls"] == 2 and c["coll"]["bytes"] == 8 + 1000   # Allreduce 1 double, Bcast 1000
        assert c["sendrecv"]["bytes"] == 40 + 40                             # both sides, 10 ints each
        assert c["io_write"] == {"calls": 1, "ns": c["io_write"]["ns"], "bytes": 4096}
        assert c["io_read"]["bytes"] == 4096                                 # as read, from the status
        assert c["io_meta"]["calls"] == 2
        # the Isends went to the other world rank, and so did the Sendrecv's 40 bytes on a communicator
        # from MPI_Comm_split (its ranks translated to world ranks, mpi_comm.c)
        assert rank["peers"] == {str(1 - rank["rank"]): {"calls": 4, "bytes": 180}} or \
            rank["peers"] == {1 - rank["rank"]: {"calls": 4, "bytes": 180}}
    fns = {f["fn"]: f for f in mpi["functions"]}
    for name, calls, nbytes in (("MPI_Mprobe", 2, 0), ("MPI_Mrecv", 2, 48), ("MPI_Imrecv", 2, 32)):
        assert (fns[name]["calls"], fns[name]["bytes"]) == (calls, nbytes), fns[name]
    assert fns["MPI_Improbe"]["calls"] >= 2
    names = set(fns)
    assert {"MPI_Allreduce", "MPI_Irecv", "MPI_Isend", "MPI_Waitall", "MPI_Bcast", "MPI_Sendrecv",
            "MPI_File_open", "MPI_File_write_at_all", "MPI_File_read_at", "MPI_File_close"} <= names
    # ROMIO's own pwrite/pread are inside the MPI-IO calls: the posix module does not count them again
    io = doc["application"]["profile"]["io_calls"]
    assert io.get("write", {}).get("bytes", 0) < 4096
    # the file's record, from MPI_File_open's name: both ranks, one open, one write and one read each
    (f,) = [x for x in doc["application"]["profile"]["files"]["shown"] if x["path"] == str(tmp_path / "f")]
    assert f["api"] == ["MPI-IO"] and f["processes"] == 2 and f["opens"] == 2
    assert (f["writes"], f["write_bytes"], f["reads"], f["read_bytes"]) == (2, 8192, 2, 8192)


@needs_mpi
@NEEDS_LIB
def test_one_sided_persistent_and_neighbourhood_calls_are_counted(app, tmp_path):
    r, doc = profile(app, tmp_path, "onesided", "20", "0", "-")
    assert r.returncode == 0, r.stderr
    mpi = doc["application"]["profile"]["mpi"]
    fns = {f["fn"]: f for f in mpi["functions"]}
    # both ranks: 20 puts of 1000 doubles, 20 gets of 100, 60 fences, one lock epoch
    assert fns["MPI_Put"]["calls"] == 40 and fns["MPI_Put"]["bytes"] == 40 * 8000
    assert fns["MPI_Get"]["calls"] == 40 and fns["MPI_Get"]["bytes"] == 40 * 800
    assert fns["MPI_Win_fence"]["calls"] == 120
    assert fns["MPI_Accumulate"]["bytes"] == 16 and fns["MPI_Fetch_and_op"]["bytes"] == 16
    assert fns["MPI_Win_lock"]["calls"] == 2 and fns["MPI_Win_unlock"]["calls"] == 2
    # persistent requests: each start counts the bytes its MPI_Send_init / MPI_Recv_init set
    assert fns["MPI_Startall"]["calls"] == 6 and fns["MPI_Startall"]["bytes"] == 6 * (80 + 80)
    assert fns["MPI_Start"]["calls"] == 4 and fns["MPI_Start"]["bytes"] == 4 * 160
    # under 1 KiB in the posting histogram: the 40 gets, 4 accumulates, and every persistent
    # request started (Startall's one by one too), by its own size
    post = mpi["hist"]["post"]
    assert post["hist"][0] == 40 + 4 + 2 * (3 * 2 + 2), post
    assert post["hist_bytes"][0] == 40 * 800 + 2 * 16 + 2 * (3 * 160 + 320), post
    # a line of two ranks without wrap-around: each has one neighbour, so one block of one double
    assert fns["MPI_Neighbor_allgather"]["bytes"] == 16 and fns["MPI_Neighbor_alltoall"]["calls"] == 2
    for rank in mpi["per_rank"]:
        c = rank["classes"]
        assert c["rma"]["calls"] == 20 + 20 + 2 and c["rma"]["bytes"] == 20 * 8000 + 20 * 800 + 16
        assert c["rma_sync"]["calls"] == 60 + 2
        g = rank["groups"]
        assert g["wait"] >= c["rma_sync"]["ns"] / 1e9 * 0.999      # fences count as waiting
        other = str(1 - rank["rank"])
        assert rank["peers"][other] == {"calls": 3 + 1, "bytes": 3 * 80 + 160}, rank["peers"]


@needs_mpi
@NEEDS_LIB
def test_persistent_collectives_count_their_bytes_at_each_start_under_the_inits_name(app, tmp_path):
    """MPI 4 persistent collectives (Open MPI 4's MPIX_ forms alike): each MPI_Start / MPI_Startall
    of one is a call of its init's name (class icoll) with the bytes its blocking form would
    count; the persistent send and receive started in the same MPI_Startall stay point-to-point
    posts; an MPI_Start of a collective alone is no post besides."""
    n = 5
    r, doc = profile(app, tmp_path, "pcoll", str(n), "0")
    assert r.returncode == 0, r.stderr
    if "no MPI 4 persistent collectives" in r.stdout:
        pytest.skip("this MPI has no MPI 4 persistent collectives, nor Open MPI's MPIX_ forms")
    pre = "MPIX_" if "persistent collectives as MPIX_" in r.stdout else "MPI_"
    mpi = doc["application"]["profile"]["mpi"]
    fns = {f["fn"]: f for f in mpi["functions"]}
    per_start = {"Bcast_init": 1000, "Reduce_init": 24, "Allgather_init": 16, "Alltoall_init": 4,
                 "Gather_init": 20, "Scatter_init": 12, "Reduce_scatter_block_init": 4, "Barrier_init": 0}
    for name, b in per_start.items():                     # 2 ranks, n starts each
        assert (fns[pre + name]["calls"], fns[pre + name]["bytes"]) == (2 * n, 2 * n * b), fns[pre + name]
    # two Allreduce_init requests, 4 doubles and 8 in place
    assert (fns[pre + "Allreduce_init"]["calls"], fns[pre + "Allreduce_init"]["bytes"]) == (4 * n, 2 * n * (32 + 64))
    # the calls themselves: Startall's bytes are its send's and receive's only; the Starts of one
    # collective each are counted under its name alone
    assert (fns["MPI_Startall"]["calls"], fns["MPI_Startall"]["bytes"]) == (2 * n, 2 * n * 160)
    assert not {"MPI_Start", "MPI_Bcast", "MPI_Allreduce", "MPI_Barrier"} & set(fns)
    post = mpi["hist"]["post"]                            # the send and the receive, no collective
    assert sum(post["hist"]) == 2 * n * 2 and post["hist_bytes"][0] == 2 * n * 160, post
    for rank in mpi["per_rank"]:
        c = rank["classes"]
        assert c["icoll"]["calls"] == 10 * n and c["icoll"]["bytes"] == n * (1000 + 32 + 64 + 24 + 16 + 4 + 20 + 12 + 4)
        assert c["post"]["calls"] == n and c["post"]["bytes"] == n * 160
        assert "coll" not in c and c["wait"]["calls"] == 9 * n
        assert rank["peers"] == {str(1 - rank["rank"]): {"calls": n, "bytes": n * 80}} or \
            rank["peers"] == {1 - rank["rank"]: {"calls": n, "bytes": n * 80}}


@needs_mpi
@NEEDS_LIB
def test_alltoallw_and_the_non_blocking_neighbourhood_collectives_are_counted(app, tmp_path):
    """MPI_Alltoallw (its mean block, each of its own datatype), MPI_Neighbor_alltoallw and the
    MPI_Ineighbor_ collectives on a line of two ranks, each with the bytes its blocking form counts;
    Alltoallv and Alltoallw count their mean block over the topology's out-degree: a line's 2
    (2 x its one dimension, the edge's MPI_PROC_NULL neighbour included), a 2 x 1 grid's 4 (1 + 1 +
    5 + 5 ints over 4: 12 bytes, where the communicator's size would give 4), a distributed graph's
    1 (3 ints: 12; its count array's second entry, 1000, must not be read)."""
    n = 4
    r, doc = profile(app, tmp_path, "neigh", str(n), "0")
    assert r.returncode == 0, r.stderr
    mpi = doc["application"]["profile"]["mpi"]
    fns = {f["fn"]: f for f in mpi["functions"]}
    per_call = {"MPI_Alltoallw": (4 + 3 * 8) // 2, "MPI_Neighbor_alltoallw": 4, "MPI_Neighbor_alltoallv": 12,
                "MPI_Ineighbor_allgather": 8, "MPI_Ineighbor_allgatherv": 16, "MPI_Ineighbor_alltoall": 4,
                "MPI_Ineighbor_alltoallv": 12, "MPI_Ineighbor_alltoallw": 4}
    for name, b in per_call.items():                      # 2 ranks, n calls each
        assert (fns[name]["calls"], fns[name]["bytes"]) == (2 * n, 2 * n * b), fns[name]
    assert sum(mpi["hist"]["coll"]["hist"]) == 2 * 3 * n  # the blocking ones: non-blocking ones enter none
    for rank in mpi["per_rank"]:
        c = rank["classes"]
        assert (c["coll"]["calls"], c["coll"]["bytes"]) == (3 * n, (14 + 4 + 12) * n)
        assert (c["icoll"]["calls"], c["icoll"]["bytes"]) == (5 * n, (8 + 16 + 4 + 12 + 4) * n)
        assert c["wait"]["calls"] == n


@needs_mpi
@NEEDS_LIB
def test_persistent_neighbourhood_collectives_and_partitioned_requests_are_counted_at_each_start(app, tmp_path):
    """MPI 4: each start of a persistent neighbourhood collective or MPI_Alltoallw_init is a call of
    its init's name (class icoll) with its blocking form's bytes; a partitioned send or receive
    started counts its whole message (partitions x count) as a persistent one would, the send's
    to its peer; MPI_Pready and its forms are posts, MPI_Parrived a wait, time only."""
    n = 5
    r, doc = profile(app, tmp_path, "pneigh", str(n), "0")
    assert r.returncode == 0, r.stderr
    if "no MPI 4 persistent collectives" in r.stdout:
        pytest.skip("this MPI has no MPI 4 persistent collectives or partitioned calls (Open MPI 4.1)")
    mpi = doc["application"]["profile"]["mpi"]
    fns = {f["fn"]: f for f in mpi["functions"]}
    per_start = {"MPI_Neighbor_allgather_init": 16, "MPI_Neighbor_allgatherv_init": 24,
                 "MPI_Neighbor_alltoall_init": 4, "MPI_Neighbor_alltoallv_init": 4, "MPI_Neighbor_alltoallw_init": 4,
                 "MPI_Neighbor_alltoall_init_c": 8, "MPI_Alltoallw_init": 14}
    if "no large-count forms" in r.stdout:                # Open MPI 5
        del per_start["MPI_Neighbor_alltoall_init_c"]
    for name, b in per_start.items():                     # 2 ranks, n starts each
        assert (fns[name]["calls"], fns[name]["bytes"]) == (2 * n, 2 * n * b), fns[name]
    # n Startall of the partitioned pair (800 bytes each); those of the collectives alone are theirs
    assert (fns["MPI_Startall"]["calls"], fns["MPI_Startall"]["bytes"]) == (2 * n, 2 * n * 1600)
    for name in ("MPI_Pready", "MPI_Pready_range", "MPI_Pready_list"):
        assert (fns[name]["calls"], fns[name]["bytes"]) == (2 * n, 0), fns[name]
    polls = sum(int(line.split()[-1]) for line in r.stdout.splitlines() if " parrived " in line)
    assert fns["MPI_Parrived"]["calls"] == polls >= 2 * n and fns["MPI_Parrived"]["bytes"] == 0
    assert not {"MPI_Neighbor_allgather", "MPI_Alltoallw", "MPI_Start"} & set(fns)
    post = mpi["hist"]["post"]                            # the partitioned requests, by their own size
    assert sum(post["hist"]) == 2 * n * 2 and post["hist_bytes"][0] == 2 * n * 1600, post
    for rank in mpi["per_rank"]:
        c = rank["classes"]
        assert (c["icoll"]["calls"], c["icoll"]["bytes"]) == (len(per_start) * n, n * sum(per_start.values()))
        assert (c["post"]["calls"], c["post"]["bytes"]) == (n + 3 * n, n * 1600)
        assert "coll" not in c and c["wait"]["calls"] >= 2 * n + n
        assert rank["peers"] == {str(1 - rank["rank"]): {"calls": n, "bytes": n * 800}} or \
            rank["peers"] == {1 - rank["rank"]: {"calls": n, "bytes": n * 800}}


@needs_mpi
@NEEDS_LIB
@pytest.mark.parametrize("bytes_, bound", [(8, "mpi_latency"), (4 << 20, "mpi_bandwidth")])
def test_a_ping_pong_is_bound_by_mpi_latency_or_bandwidth_by_its_message_size(app, tmp_path, bytes_, bound):
    n = 20000 if bytes_ == 8 else 150
    r, doc = profile(app, tmp_path, "pingpong", str(n), str(bytes_))
    assert r.returncode == 0, r.stderr
    mpi = doc["application"]["profile"]["mpi"]
    sends = {f["fn"]: f for f in mpi["functions"]}["MPI_Send"]
    assert sends["calls"] == 2 * n and sends["bytes"] == 2 * n * bytes_
    assert bounds(doc)[0] == bound, r.stderr
    assert "cpu" not in bounds(doc)              # the ranks poll inside MPI: that is not compute
    text = " ".join(r.stderr.split())               # the page wraps at the terminal's width
    assert "\nMPI\n" in r.stderr and "load balance" in text and "parallel efficiency" in text


@needs_mpi
@NEEDS_LIB
def test_one_rank_working_four_times_as_long_is_imbalance_naming_it(app, tmp_path):
    r, doc = profile(app, tmp_path, "imbalance", "12", "0")
    assert r.returncode == 0, r.stderr
    # rank 0 computes all the time: the program is on a CPU ~60% of its thread-time (a cpu bound
    # beside), and ~37% is rank 1 waiting for it
    assert "imbalance" in bounds(doc) and "waiting" not in bounds(doc), r.stderr
    f = {x["id"]: x for x in doc["findings"]}["profile.mpi.imbalance"]
    assert "rank 0 works" in f["title"]
    assert doc["application"]["profile"]["mpi"]["load_balance"] < 0.85


@needs_mpi
@NEEDS_LIB
def test_each_rank_wrapped_reports_once_with_every_rank_gathered_at_rank_0(app, tmp_path):
    """mpirun -n 2 ceiling profile -- ./app: two ceilings, one report (rank 0's), both ranks in it."""
    exe, found, tmp = app
    out = tmp_path / "p.json"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = run_or_show([*found["argv2"], sys.executable, "-m", "ceiling", "profile", "--no-store", "--save-json",
                     str(out), "--", str(exe), "pingpong", "500", "64", "0"], env)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("Where the time went") == 1, r.stderr
    doc = json.loads(out.read_text())
    prof = doc["application"]["profile"]
    assert prof["wrapped"] == {"rank": 0, "size": 2}
    per = {x["rank"]: x for x in prof["mpi"]["per_rank"]}
    assert sorted(per) == [0, 1] and prof["mpi"]["ranks"] == 2
    for rank in (0, 1):                           # each rank's own counts, rank 1's through the gather
        assert per[rank]["classes"]["send"] == {"calls": 500, "ns": per[rank]["classes"]["send"]["ns"],
                                                "bytes": 500 * 64}
        # MPI_Init and MPI_Finalize: rank 1's Finalize too, though its record left it inside that call
        assert per[rank]["classes"]["init"]["calls"] == 2, per[rank]["classes"]
    fns = {f["fn"]: f for f in prof["mpi"]["functions"]}
    assert fns["MPI_Finalize"]["calls"] == 2
    # its time is not known, and said so; rank 0's is
    assert per[1]["finalize_s"] is None and per[0]["finalize_s"] is not None
    assert prof["mpi"]["finalize_unknown"]["ranks"] == [1]
    assert "profile.mpi.ranks_missing" not in {f["id"] for f in doc["findings"]}
    # rank 1's threads are in the split from its record, and each rank's CPU shares in the table
    assert prof["from_records"]["processes"] == 1 and prof["from_records"]["threads"] >= 1, prof["from_records"]
    for rank in (0, 1):
        cpu = per[rank]["cpu"]
        assert cpu and sum(cpu.values()) == pytest.approx(1.0, abs=0.01) and cpu["on_cpu"] > 0, per[rank]
    assert "the other ranks' threads as the kernel counted them" in " ".join(r.stderr.split())


@needs_mpi
@NEEDS_LIB
def test_ctrl_c_to_a_wrapped_job_still_gives_rank_0s_report_naming_the_ranks_that_did_not(app, tmp_path):
    """mpiexec -n 2 ceiling profile -- ./app, Ctrl-C to mpiexec once both ranks run: Hydra passes
    SIGINT to each rank's ceiling and kills them all once one exits; rank 0's reported nothing
    (it was killed measuring the interposer's cost), and then, 3 runs in 10, nothing when rank 1's
    ceiling exited first. Now rank 1's waits for the launcher to end it, and rank 0's reports,
    partial, naming rank 1. mpiexec's status is Hydra's: rank 0's 130, or 9 where Hydra reaped
    the rank it killed first."""
    exe, found, tmp = app
    if found["launcher_family"] == "Open MPI":
        pytest.skip("Open MPI's mpirun handles Ctrl-C its own way; README says what it gives")
    out = tmp_path / "p.json"
    env = run_env(tmp, NO_COLOR="1")
    script = 'export TEST_LAUNCHER_PID=$$; exec "$@"'          # the launcher takes the shell's pid
    r = run_or_show(["sh", "-c", script, "sh", *found["argv2"], sys.executable, "-m", "ceiling", "profile",
                     "--no-store", "--no-measure", "--save-json", str(out), "--", str(exe), "ctrlc", "1", "1"],
                    env, timeout=120)
    assert out.exists(), r.stderr
    assert r.returncode in (130, 9), r.stderr
    doc = json.loads(out.read_text())
    assert doc["partial"] and doc["partial_reason"].startswith("interrupted (Ctrl-C)")
    (f,) = [x for x in doc["findings"] if x["id"] == "profile.mpi.ranks_missing"]
    assert f["data"]["missing"] == [1] and f["title"].startswith("1 of 2 ranks did not report (rank 1)")
    assert doc["application"]["overhead"]["why"] == "not measured: the job was interrupted"


@needs_mpi
@NEEDS_LIB
def test_a_wrapped_rank_0_that_cannot_report_ends_the_job_instead_of_leaving_it_in_mpi_init(app, tmp_path):
    """rank 0's ceiling refuses a bad output path before its program starts; rank 1's program
    waits in MPI_Init for rank 0's, and neither Hydra nor srun ends a job for one process's
    exit status. Before, the job hung there until killed."""
    exe, found, tmp = app
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    bad = tmp_path / "missing" / "p.json"
    r = run_or_show([*found["argv2"], sys.executable, "-m", "ceiling", "profile", "--no-store", "--save-json",
                     str(bad), "--", str(exe), "pingpong", "50", "64", "0"], env, timeout=120)
    assert r.returncode != 0
    assert f"directory {bad.parent} does not exist" in r.stderr, r.stderr
    assert "ending the MPI job" in r.stderr, r.stderr
    assert "Where the time went" not in r.stderr and not bad.parent.exists()


@needs_mpi
@NEEDS_LIB
def test_a_wrapped_rank_whose_program_is_missing_ends_the_job_instead_of_leaving_it_in_mpi_init(app, tmp_path):
    """rank 1's program is not there (a build in a node's local /tmp): there is no program
    to call MPI_Abort, and rank 0's program would wait in MPI_Init for it under Hydra and
    srun. ceiling's own mpi4py aborts the job in its place (Open MPI's mpirun would end
    it anyway)."""
    exe, found, tmp = app
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    ceiling = f"{sys.executable} -m ceiling profile --no-store --"
    rank = '"${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-$SLURM_PROCID}}"'
    script = (f'if [ {rank} = 1 ]; then exec {ceiling} {tmp_path}/gone/app; '
              f'else exec {ceiling} {exe} pingpong 50 64 0; fi')
    r = run_or_show([*found["argv2"], "/bin/sh", "-c", script], env, timeout=150)
    assert r.returncode != 0
    assert f"rank 1: profile: {tmp_path}/gone/app: command not found" in r.stderr, r.stderr
    if found["launcher_family"] != "Open MPI":       # mpirun may end the job before rank 1 says so
        assert "ending the MPI job" in r.stderr and "could not" not in r.stderr, r.stderr


def test_a_rank_of_a_launch_is_told_by_its_launchers_variables():
    assert launched_rank({"PMI_RANK": "1", "PMI_SIZE": "4"}) == (1, 4)
    assert launched_rank({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}) == (0, 2)
    assert launched_rank({"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "8", "SLURM_STEP_ID": "0"}) == (3, 8)
    # a batch script's shell is rank 0 of nothing; a single rank is no MPI job to gather
    assert launched_rank({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "8", "SLURM_STEP_ID": "batch"}) is None
    assert launched_rank({"PMI_RANK": "0", "PMI_SIZE": "1"}) is None
    assert launched_rank({}) is None


@needs_mpi
@NEEDS_LIB
def test_one_rank_writing_everything_while_the_other_waits_is_a_single_writer(app, tmp_path):
    r, doc = profile(app, tmp_path, "writer", "64", "0", str(tmp_path / "out.dat"))
    assert r.returncode == 0, r.stderr
    f = {x["id"]: x for x in doc["findings"]}["profile.io.single_writer"]
    assert f["data"]["rank"] == 0 and f["data"]["share"] > 0.99 and f["data"]["bytes"] >= 64 << 20
    assert "rank 0 writes 100%" in f["title"]
    # and the file itself, from rank 0's per-file record: one process, through stdio
    (out,) = [x for x in doc["application"]["profile"]["files"]["shown"] if x["path"].endswith("/out.dat")]
    assert (out["processes"], out["write_bytes"], out["api"], out["opens"]) == (1, 64 << 20, ["stdio"], 1)


# ---- a program that tests for MPI 4 calls before making them -----------------------

# mpi4py 4's wheels reference MPI_Send_c and the other MPI 4 calls weakly, from a library Python
# loads with dlopen, and call them when not NULL (else the int forms): as here, where the library
# also asks dlsym for a persistent collective and Open MPI 4's MPIX_ form of it.
WEAK_LIB = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#pragma weak MPI_Send_c
#pragma weak MPI_Recv_c
#pragma weak MPI_Allgatherv_c
int MPI_Send_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm);
int MPI_Recv_c(void *buf, MPI_Count count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status *st);
int MPI_Allgatherv_c(const void *sbuf, MPI_Count scount, MPI_Datatype stype, void *rbuf, const MPI_Count rcounts[],
                     const MPI_Aint displs[], MPI_Datatype rtype, MPI_Comm comm);

int probe(int rank, int n)
{
    printf("rank %d weak MPI_Send_c %d PMPI_Send_c %d\n", rank, MPI_Send_c != NULL,
           dlsym(RTLD_DEFAULT, "PMPI_Send_c") != NULL);
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "MPIX_Allreduce_init" : "MPI_Allreduce_init";
        char pname[64];
        snprintf(pname, sizeof pname, "P%s", name);
        printf("rank %d dlsym %s %d P %d\n", rank, name, dlsym(RTLD_DEFAULT, name) != NULL,
               dlsym(RTLD_DEFAULT, pname) != NULL);
    }
    fflush(stdout);                                            /* before a call that may stop it */
    double x[4] = {rank, 1, 2, 3}, all[5] = {0};
    MPI_Count counts[2] = {2, 3};
    MPI_Aint at[2] = {0, 2};
    int icounts[2] = {2, 3}, iat[2] = {0, 2};
    if (MPI_Allgatherv_c)          /* rank 0 gives 2 doubles, rank 1 three */
        MPI_Allgatherv_c(x, rank + 2, MPI_DOUBLE, all, counts, at, MPI_DOUBLE, MPI_COMM_WORLD);
    else
        MPI_Allgatherv(x, rank + 2, MPI_DOUBLE, all, icounts, iat, MPI_DOUBLE, MPI_COMM_WORLD);
    if (all[0] != 0 || all[1] != 1 || all[2] != 1 || all[4] != 2) return 1;
    if (MPI_Send_c && rank == 0 && !dlsym(RTLD_DEFAULT, "PMPI_Send_c"))   /* a count no int holds */
        printf("rank 0 count past an int: %d\n", MPI_Send_c(x, (MPI_Count)1 << 31, MPI_DOUBLE, 1, 9, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) {
        if (rank == 0) {
            if (MPI_Send_c) MPI_Send_c(x, 4, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD);
            else MPI_Send(x, 4, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD);
        } else {
            if (MPI_Recv_c) MPI_Recv_c(x, 4, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else MPI_Recv(x, 4, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (x[0] != 0) return 1;
        }
    }
    return 0;
}
"""
WEAK_APP = r"""
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);      /* as Python loads an extension */
    int (*probe)(int, int) = lib ? (int (*)(int, int))dlsym(lib, "probe") : NULL;
    if (!probe) { fprintf(stderr, "%s\n", dlerror()); MPI_Abort(MPI_COMM_WORLD, 3); }
    int bad = probe(rank, atoi(argv[2]));
    MPI_Finalize();
    return bad;
}
"""


@needs_mpi
@NEEDS_LIB
def test_a_program_testing_for_mpi_4_calls_works_and_is_counted_on_any_mpi(mpi_setup, tmp_path):
    """A program that tests for MPI 4 large-count calls finds the interposer's wrappers, on any MPI.
    On an MPI 3 library (Open MPI 4.1; Open MPI 5.0 has no large-count calls either), where the
    wrapper's PMPI function is missing, the wrapper calls the int form (mpi.h, PMPI_REAL_S; for
    Allgatherv_c its arrays copied, mpi_narrow.c), and refuses a count no int holds with
    MPI_ERR_COUNT (2); the data arrive and the calls are counted under the names the program used."""
    tmp, found = mpi_setup
    for name, src, args in (("libweak.so", WEAK_LIB, ["-shared", "-fPIC"]), ("weakapp", WEAK_APP, [])):
        (tmp_path / f"{name}.c").write_text(src)
        r = subprocess.run([found["mpicc"], "-O1", *args, "-o", str(tmp_path / name), str(tmp_path / f"{name}.c"),
                            "-ldl"], capture_output=True, text=True, timeout=120, env=run_env(tmp))
        assert r.returncode == 0, r.stderr
    n = 7
    out = tmp_path / "p.json"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = run_or_show([sys.executable, "-m", "ceiling", "profile", "--no-store", "--save-json", str(out), "--",
                     *found["argv2"], str(tmp_path / "weakapp"), str(tmp_path / "libweak.so"), str(n)], env)
    assert r.returncode == 0, r.stdout + r.stderr
    seen = [line.split() for line in r.stdout.splitlines() if line.startswith("rank ") and " P" in line]
    assert len(seen) == 6 and {w[4] for w in seen if w[3] == "MPI_Send_c"} == {"1"}, r.stdout
    mpi4 = {w[6] for w in seen if w[3] == "MPI_Send_c"} == {"1"}
    assert ("count past an int: 2" in r.stdout) != mpi4, r.stdout
    fns = {f["fn"]: f for f in json.loads(out.read_text())["application"]["profile"]["mpi"]["functions"]}
    for name in ("MPI_Send_c", "MPI_Recv_c"):
        assert (fns[name]["calls"], fns[name]["bytes"]) == (n, 32 * n), fns
    assert (fns["MPI_Allgatherv_c"]["calls"], fns["MPI_Allgatherv_c"]["bytes"]) == (2, 16 + 24), fns


@needs_mpi
@NEEDS_LIB
def test_an_mpi4py_program_is_counted_whichever_calls_its_mpi4py_makes(mpi_setup, tmp_path):
    """mpi4py sends a Python object with MPI_Send (MPI_Send_c in mpi4py 4, where the MPI has it)
    and receives it with a matched probe and receive: every one is counted, both sides' bytes."""
    tmp, found = mpi_setup
    n = 25
    prog = ("from mpi4py import MPI\nc = MPI.COMM_WORLD\nfor i in range(%d):\n"
            "    if c.rank == 0: c.send(list(range(i)), dest=1); assert c.recv(source=1) == i\n"
            "    else: c.send(len(c.recv(source=0)), dest=0)\n" % n)
    out = tmp_path / "p.json"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = run_or_show([sys.executable, "-m", "ceiling", "profile", "--no-store", "--save-json", str(out), "--",
                     *found["argv2"], sys.executable, "-c", prog], env)
    assert r.returncode == 0, r.stdout + r.stderr
    fns = {f["fn"]: f for f in json.loads(out.read_text())["application"]["profile"]["mpi"]["functions"]}
    sends = [fns[k] for k in ("MPI_Send", "MPI_Send_c") if k in fns]
    recvs = [fns[k] for k in ("MPI_Mrecv", "MPI_Mrecv_c", "MPI_Recv", "MPI_Recv_c") if k in fns]
    assert sum(f["calls"] for f in sends) == 2 * n and sum(f["calls"] for f in recvs) == 2 * n, fns
    assert sum(f["bytes"] for f in sends) == sum(f["bytes"] for f in recvs) > 2 * n, fns


# ---- the analysis, on records written by hand ------------------------------------

def record(pid, rank, run_ns, classes, hist_ns=None, size=2, reason="exit", end=True, extra=()):
    lines = ["ceiling-interpose 1",
             f"process pid={pid} ppid=1 forked=0 host=n1 exe=/a reason={reason} signal=0 threads=1 threads_lost=0 "
             f"start_ns=100 end_ns={run_ns + 2000} start_unix_ns=0",
             "module name=mpi version=1 enabled=1",
             f"mpi rank={rank} size={size} family=mpich world=1 thread_level=-1 init_ns=1000 "
             f"finalize_ns={1000 + run_ns} library=x"]
    for cls, (calls, ns, nbytes) in classes.items():
        lines.append(f"mpi class={cls} calls={calls} ns={ns} bytes={nbytes}")
    for kind, small, large in (hist_ns or []):
        zeros = " ".join(f"{b}=0" for b in ("2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1m",
                                              "2m", "4m", "8m", "16m", "32m"))
        lines.append(f"mpi hist_ns={kind} lt1k={small} 1k=0 {zeros} ge64m={large}")
    lines += extra
    if end:
        lines.append(f"end pid={pid} truncated=0")
    return "\n".join(lines) + "\n"


def test_load_balance_and_efficiencies_are_pops():
    # rank 0: 1 s outside MPI; rank 1: 0.5 s outside, 0.5 s in a collective
    recs = parse(record(1, 0, 10**9, {}) + record(2, 1, 10**9, {"coll": (10, 5 * 10**8, 0)}))
    metrics, bnds, findings, s = mpi_conclude(recs)
    assert s["load_balance"] == pytest.approx(0.75) and s["communication_efficiency"] == pytest.approx(1.0)
    assert s["parallel_efficiency"] == pytest.approx(0.75)
    assert [b.bound for b in bnds] == ["imbalance"] and bnds[0].share == pytest.approx(0.25)
    assert {m.name for m in metrics} >= {"app.mpi.time", "app.mpi.load_balance", "app.mpi.parallel_efficiency"}


def test_balanced_ranks_in_mpi_are_latency_or_bandwidth_by_where_the_time_went():
    small = [("p2p", 9 * 10**8, 10**8)]
    recs = parse(record(1, 0, 10**9, {"send": (5, 6 * 10**8, 40)}, small) +
                 record(2, 1, 10**9, {"recv": (5, 6 * 10**8, 40)}, small))
    assert [b.bound for b in mpi_conclude(recs)[1]] == ["mpi_latency"]
    large = [("p2p", 10**8, 9 * 10**8)]
    recs = parse(record(1, 0, 10**9, {"send": (5, 6 * 10**8, 40)}, large) +
                 record(2, 1, 10**9, {"recv": (5, 6 * 10**8, 40)}, large))
    assert [b.bound for b in mpi_conclude(recs)[1]] == ["mpi_bandwidth"]


def test_ranks_that_left_no_record_are_named_and_no_mpi_is_no_mpi_part():
    recs = parse(record(1, 0, 10**9, {}, size=4) + record(2, 1, 10**9, {}, size=4))
    findings = mpi_conclude(recs)[2]
    assert [f.id for f in findings] == ["profile.mpi.ranks_missing"] and "2 of 4 ranks" in findings[0].title
    assert mpi_conclude(parse("ceiling-interpose 1\nprocess pid=3 host=n\nend pid=3\n")) == ([], [], [], {})


def test_a_rank_that_ended_without_mpi_finalize_is_named_with_how_and_the_killed_one_is_said_missing():
    # an express launch of 3 ranks: rank 1 called _exit(3) before MPI_Finalize (its record says reason=exit
    # by=_exit, finalize_ns=0), rank 2 was killed by SIGTERM, rank 0 by the launcher's SIGKILL: no record
    died = record(2, 1, 10**9, {}, size=3).replace("reason=exit ", "reason=exit by=_exit ").replace(
        f"finalize_ns={1000 + 10**9}", "finalize_ns=0")
    killed = record(3, 2, 10**9, {}, size=3).replace("reason=exit signal=0", "reason=signal signal=15").replace(
        f"finalize_ns={1000 + 10**9}", "finalize_ns=0")
    findings = {f.id: f for f in mpi_conclude(parse(died + killed))[2]}
    f = findings["profile.mpi.rank_ended"]
    assert f.title == "2 ranks ended without MPI_Finalize: 1, 2"
    assert "rank 1 (pid 2 on n1) ended by _exit()" in f.evidence and "rank 2 (pid 3 on n1) killed by SIGTERM" in \
        f.evidence
    assert [r["how"] for r in f.data["ranks"]] == ["ended by _exit()", "killed by SIGTERM"]
    missing = findings["profile.mpi.ranks_missing"]
    assert "records came from ranks 1, 2" in missing.evidence and "leaves no record" in missing.why
    # ranks that reached MPI_Finalize: nothing said
    assert "profile.mpi.rank_ended" not in {x.id for x in mpi_conclude(parse(record(1, 0, 10**9, {})))[2]}


def test_mpi_start_up_is_said_apart_and_is_not_the_programs_waiting():
    """Open MPI 5 spends about a second in MPI_Init on one node, off any CPU while the ranks are
    wired up: a short run is mostly that, which is the runtime's, not the program waiting."""
    from ceiling.analysis.profile import _with_mpi
    from ceiling.results.analysis import Bound
    from ceiling.results.model import WARN, Finding

    def job(init_ns):     # each rank: MPI_Init, a 0.5 s run (0.1 s in collectives), 0.05 s in MPI_Finalize
        life = init_ns + 55 * 10**7
        return parse("".join(record(pid, pid - 1, 5 * 10**8, {"coll": (10, 10**8, 0)}, extra=[
            f"mpi fn=MPI_Init calls=1 ns={init_ns} bytes=0", f"mpi fn=MPI_Finalize calls=1 ns={5 * 10**7} bytes=0",
            f"proc task={pid} life_ns={life} run_ns={4 * 10**8} runq_ns=0"]) for pid in (1, 2)))

    def waiting_kept(mpi):   # the /proc split of such a job: off any CPU 75% of its life
        shares = {"on_cpu": 0.25, "runq": 0.0, "off_cpu": 0.75}
        b = [Bound("application", "waiting", 0.75, "off any CPU 75%", {})]
        f = [Finding(id="profile.waiting", status=WARN, title="Off any CPU", evidence="", why="", fix="")]
        _, bounds, findings, _ = _with_mpi(mpi, shares, [], b, f)
        return "waiting" in [x.bound for x in bounds], "profile.waiting" in [x.id for x in findings]

    slow = mpi_conclude(job(10**9))
    s = slow[3]
    assert s["life_share"]["startup"]["mean"] == pytest.approx(1.05 / 1.55)
    assert s["life_share"]["mpi"]["mean"] == pytest.approx(0.1 / 1.55)
    assert s["per_rank"][0]["life_s"] == pytest.approx(1.55) and s["startup_s"]["max"] == pytest.approx(1.05)
    f = {x.id: x for x in slow[2]}["profile.mpi.startup"]
    assert "68% of the ranks' life" in f.title and "MPI_Init 1 s and MPI_Finalize 0.05 s per rank" in f.evidence
    assert waiting_kept(slow) == (False, False)     # the start-up was the waiting
    quick = mpi_conclude(job(10**7))                  # 10 ms: MPICH's hydra on one node
    assert "profile.mpi.startup" not in {x.id for x in quick[2]}
    assert waiting_kept(quick) == (True, True)      # off any CPU 75%, none of it MPI's: the program's


def test_a_checkpoint_is_superseded_by_the_same_process_record_at_exit():
    text = (record(1, 0, 10**9, {"coll": (1, 1, 0)}, reason="checkpoint") +
            record(1, 0, 10**9, {"coll": (2, 2, 0)}) +
            record(2, 1, 10**9, {"coll": (3, 3, 0)}, reason="checkpoint") +
            record(2, 1, 10**9, {"coll": (4, 4, 0)}, end=False))   # cut short: the checkpoint stands
    kept = latest(parse(text))
    assert [(r.process.pid, r.lines["mpi"][1].calls) for r in kept] == [(1, 2), (2, 3)]
