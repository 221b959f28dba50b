"""cluster: what ceiling does across ranks and nodes with MPI (mpi.py: the library,
its compiler and launcher, the compiled timing loops, facts gathered from ranks)."""

# Where the two ranks of a pair run, in the order the network bench measures them, and how
# the report names each (bench/network.py, analysis/summary.py, report/html.py).
PLACEMENT_TITLES = {"same_l3": "same L3", "same_socket": "same socket, different L3",
                    "cross_socket": "across sockets", "cross_node": "across nodes"}
PLACEMENTS = tuple(PLACEMENT_TITLES)
