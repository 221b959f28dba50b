"""Errors a user can cause, each with its own exit code.

The CLI prints ``ceiling: <message>`` on one line and exits with the code of
the error's class; nothing else prints tracebacks for these. The table is in
README.md ("Exit codes") and tested in tests/test_cli_errors.py.
"""


class CeilingError(Exception):
    """Base class: a clear one-line problem with a distinct exit code."""

    exit_code = 1


class UsageError(CeilingError):
    """Unknown verb, option or kernel name; a malformed option value."""

    exit_code = 2


class BadValueError(CeilingError):
    """A size, thread count or other number out of range."""

    exit_code = 3


class PathError(CeilingError):
    """An output or database path that cannot be written."""

    exit_code = 4


class StoreError(CeilingError):
    """A results database that is corrupt, or written by a newer ceiling."""

    exit_code = 5


class StudyError(StoreError):
    """A study document (a file, a history row) that does not fit the model, or one of its member runs
    that does not: a study's own code, so a script tells it from a damaged run or history."""

    exit_code = 12


class ConfigError(CeilingError):
    """A config file with unknown keys, wrong types, or bad TOML."""

    exit_code = 6


class CoreError(CeilingError):
    """The C core is missing, too old, or a kernel refused its parameters."""

    exit_code = 7


class ProbeBusyError(CeilingError):
    """Another ``ceiling probe`` holds the probe directory's lock: one probe per directory."""

    exit_code = 14          # 13 is compare's REGRESSION_EXIT


class PortInUseError(CeilingError):
    """The address ``ceiling probe --listen`` should export its metrics on is taken or refused."""

    exit_code = 15


# 8 is the installer's: no C compiler (scripts/bootstrap.sh).
NO_COMPILER_EXIT = 8


class MPIUnavailableError(CeilingError):
    """mpi4py or an MPI library is missing, or no compiler wrapper / launcher matches it."""

    exit_code = 10


class StalledError(CeilingError):
    """A rank of an MPI job stopped answering: the job ended at a deadline (cluster/watchdog.py); also
    the exit of a --cluster run that left out nodes which could not be measured."""

    exit_code = 11


class ValidationError(CeilingError):
    """A kernel's output did not match its analytic value: its timing is not trusted."""

    exit_code = 9


class MetricNotFoundError(CeilingError):
    """``ceiling scale --metric REGEX``: the program's output held no match of the regex, so the
    figure the study was to read does not exist (the run's wall time is not put in its place)."""

    exit_code = 16          # 14 and 15 are the probe's


class Otf2UnavailableError(CeilingError):
    """``ceiling trace --format otf2`` where OTF2's library (libotf2 3.x) is not installed: said before the
    program runs (core/otf2lib.py says where it is looked for)."""

    exit_code = 17


# ceiling compare --fail-on worse:P%: a significant regression of at least P% was found (not an error:
# the comparison is printed whole first).
REGRESSION_EXIT = 13

INTERRUPTED_EXIT = 130     # Ctrl-C: 128 + SIGINT
TERMINATED_EXIT = 143      # SIGTERM (scancel, a job's time limit, mpirun aborting its job): 128 + SIGTERM
TERMINATED = "terminated (SIGTERM)"     # the KeyboardInterrupt a SIGTERM becomes carries this


def raise_terminated(signum, frame) -> None:
    """The SIGTERM handler that makes it a KeyboardInterrupt (cli.main; RunDir for library callers)."""
    raise KeyboardInterrupt(TERMINATED)


def interruption(e: BaseException) -> "tuple[str, int]":
    """(what stopped the run, the exit code) for a KeyboardInterrupt: Ctrl-C, or a SIGTERM made into one."""
    if e.args and e.args[0] == TERMINATED:
        return TERMINATED, TERMINATED_EXIT
    return "interrupted (Ctrl-C)", INTERRUPTED_EXIT


class Held:
    """The signal held_signals() caught, if any."""

    def __init__(self) -> None:
        self.signum: "int | None" = None

    def interruption(self) -> "tuple[str, int]":
        """(what it was, its exit code), as interruption() says for the exception it would have raised."""
        import signal
        return interruption(KeyboardInterrupt(TERMINATED) if self.signum == signal.SIGTERM else KeyboardInterrupt())


class held_signals:
    """Hold SIGINT and SIGTERM through a block that must finish (delivering a measured
    run: the history, the JSON, the HTML): the first signal is remembered in the
    ``Held`` it yields and acted on by the caller afterwards. A second Ctrl-C raises
    at once, as the user insists; a SIGTERM after a signal is only noted (Open MPI's
    mpirun answers the Ctrl-C that also reached the ranks with a SIGTERM of its own,
    and sends SIGKILL later if it must). Outside the main thread it holds nothing,
    as cluster.stop.DeferredStop."""

    def __enter__(self) -> Held:
        import signal
        import threading
        self.held = Held()
        self.old: dict = {}
        if threading.current_thread() is not threading.main_thread():
            return self.held
        for s in (signal.SIGINT, signal.SIGTERM):
            self.old[s] = signal.getsignal(s)
            signal.signal(s, self._handler)
        return self.held

    def _handler(self, signum, frame) -> None:
        import signal
        if self.held.signum is None:
            self.held.signum = signum
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt(TERMINATED if self.held.signum == signal.SIGTERM else "interrupted")

    def __exit__(self, *exc) -> None:
        _restore_handlers(self.old)


def _restore_handlers(old: dict) -> None:
    """Put back the handlers in ``old`` (signal -> handler), every one of them: signal.signal
    runs pending handlers before it installs the new one, and one that raises leaves the old
    one in place, so each is tried again (the pending flag is cleared by then). The first
    exception is raised once all are back."""
    import signal
    first: "BaseException | None" = None
    for s, h in old.items():
        while True:
            try:
                signal.signal(s, h)
                break
            except BaseException as e:      # noqa: BLE001 - raised below, after the others
                first = first or e
    if first is not None:
        raise first


def _raise_all(signums: list) -> None:
    """Run each signal's handler now (raise_signal); the first exception is raised once all ran,
    so a SIGTERM deferred after a Ctrl-C still ends the process where its handler is SIG_DFL."""
    import signal
    first: "BaseException | None" = None
    for signum in dict.fromkeys(signums):
        try:
            signal.raise_signal(signum)
        except BaseException as e:          # noqa: BLE001 - raised below
            first = first or e
    if first is not None:
        raise first


class signals_deferred:
    """SIGINT and SIGTERM wait until the block ends, then their handlers run (and may raise)
    there: a block that must not be cut in the middle (making a directory and registering its
    removal; starting a worker thread the caller must wait for). Blocking the signals is not
    enough: another thread of the process (the progress ticker, a sampler) takes the signal,
    and Python runs the handler in the main thread anyway. A handler set from C (getsignal()
    is None) cannot be put back, and outside the main thread none can be set: then nothing is
    deferred."""

    def __enter__(self) -> None:
        import signal
        import threading
        self.old: dict = {}
        self.pending: list = []
        if threading.current_thread() is not threading.main_thread():
            return
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        if any(h is None for h in old.values()):
            return
        try:
            for s in old:
                self.old[s] = old[s]
                signal.signal(s, self._defer)
        except BaseException:
            self.__exit__()
            raise

    def _defer(self, signum, frame) -> None:
        self.pending.append(signum)

    def __exit__(self, *exc) -> None:
        try:
            _restore_handlers(self.old)
        finally:
            _raise_all(self.pending)
