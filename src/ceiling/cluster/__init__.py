"""cluster: what ceiling does across ranks and nodes with MPI (mpi.py: the library,
its compiler and launcher, the compiled timing loops, facts gathered from ranks)."""
