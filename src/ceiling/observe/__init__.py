"""Observing a program is a measurement (as bench/ measures the node): ``observe`` starts
the command with its instruments (the /proc sampler, hardware counters, the LD_PRELOAD
interposer, its environment), waits for it, and returns an ``Observation``: how it ended,
its processes and threads, its records and counters, what the instruments cost. The verbs
that run a program (profile, --overhead's reruns; trace and scale next) call ``observe``
and pass the observation to their analysis; none starts a program itself."""
from .model import Instruments, Interposer, Observation, interruption  # noqa: F401
from .preload import preload_refused  # noqa: F401
from .run import observe  # noqa: F401
