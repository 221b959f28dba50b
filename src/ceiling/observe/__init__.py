"""Observing a program is a measurement (as bench/ measures the node): ``observe`` starts
the command with its instruments (the /proc sampler, hardware counters, the LD_PRELOAD
interposer, its environment, a deadline, a watcher of its pages, companions beside it),
waits for it, and returns an ``Observation``: how it ended, its processes and threads, its
records and counters, what the instruments cost. Whatever runs a program (profile,
--overhead's reruns, --experiments' reruns in experiments/; trace and scale next) calls
``observe`` and passes the observation to its analysis; nothing else in the application half
starts a process (tests/test_layers.py checks it), the co-runners that work beside a program
included (companions.py)."""
from .model import Instruments, Interposer, Observation, Overdue, TraceLimits, interruption  # noqa: F401
from .preload import preload_refused  # noqa: F401
from .run import observe  # noqa: F401
