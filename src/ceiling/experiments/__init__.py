"""Experiments on a program: it observed again (observe/) under varied conditions, each
re-run with a deadline in a process group of its own and its output discarded: beside
co-runners, with the other page size and watched for its working set (sensitivity.py), on a
few thread counts (scaling.py). They measure; analysis/profile_experiments.py and
profile_scaling.py say what the figures mean, verbs/profile_experiments.py strings them
together for `ceiling profile --experiments`."""
