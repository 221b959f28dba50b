"""cluster: everything ceiling does with MPI, across ranks and nodes.

- launch.py: how this process was started (launcher, rank, size, node), from the
  environment alone through one table of launchers, without starting MPI;
- comm.py: the MPI world, initialised at the thread level ceiling measures with;
- stop.py: the one stop agreement (errors and signals agreed by every rank);
- library.py: the MPI library mpi4py loaded, its compiler wrapper and launcher;
- build.py: the C timing loops compiled against that library, once per node;
- netbench.py: the ctypes binding of those timing loops;
- gather.py: what ranks learn of each other (node, host, pid, CPUs, topology),
  gathered once, and results brought to rank 0;
- placement.py: where ranks go (pairs per placement, a CPU per rank).

Nothing here imports mpi4py at module level: importing ceiling never starts MPI.
"""
