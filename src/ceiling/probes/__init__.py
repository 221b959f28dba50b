"""Small measurements that checks and benches both use (a check that needs a
measurement takes it from here, never from a bench module).

c2c.py: one core-to-core cache-line ping-pong between two CPUs, and what the
two CPUs share.
proc_sampler.py: a running program's threads and processes read from /proc by
its parent (ceiling profile).
perf_counters.py: a program's hardware and software counters through
perf_event_open(2), opened before its exec by the parent that starts it.
"""
