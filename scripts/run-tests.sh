#!/usr/bin/env bash
# `make test`: the suite in two passes, and the MPI tests again under Open MPI beside the second.
#
# 1. The tests not marked serial, spread over pytest-xdist workers (TEST_JOBS: auto, one per CPU; a
#    number; 0 for one process).
# 2. The tests marked serial (they race or measure time: tests/conftest.py) one at a time, and beside
#    them scripts/test-openmpi.sh --if-installed: the tests that start ranks, again with Debian's Open MPI
#    and mpi4py where those are installed (nothing is installed here; it says so and skips otherwise).
#    Both passes spend most of their time waiting on deadlines and launches (about 0.6 and 0.4 of one CPU),
#    so together they take little longer than the longer one alone; the Open MPI pass's output is kept
#    in a file and shown when it ends. The tests marked alone take a lock the other pass's tests share
#    (CEILING_TEST_LOCK, tests/conftest.py), so none of them runs beside a test of the other pass.
# Every pass runs; any failing fails the command (a pass that selects no test, exit 5, is no failure).
# PYTEST_ARGS adds options to both make test passes.
set -u
cd "$(dirname "$0")/.."
py=${VENV:-.venv}/bin/python
rc=0
keep() { [ "$1" -eq 0 ] || [ "$1" -eq 5 ] || rc=$1; }
# shellcheck disable=SC2086
"$py" -m pytest -q -n "${TEST_JOBS:-auto}" --dist worksteal -m "not serial" ${PYTEST_ARGS:-}; keep $?
log=$(mktemp "${TMPDIR:-/tmp}/ceiling-openmpi.XXXXXX")
# the two passes side by side share a lock: a test marked alone (tests/conftest.py) runs while no test of
# the other pass does
CEILING_TEST_LOCK=$(mktemp "${TMPDIR:-/tmp}/ceiling-tests-lock.XXXXXX")
export CEILING_TEST_LOCK
# In its own session, which the trap below sends SIGINT to on Ctrl-C (a terminal's Ctrl-C does not
# reach a background job of a script), so that pytest ends its tests and their ranks; `trap - INT` undoes
# the SIGINT a script's background job would otherwise ignore.
(trap - INT; exec setsid scripts/test-openmpi.sh --if-installed) >"$log" 2>&1 &
ompi=$!
stop() {  # SIGINT first, so that pytest tears its tests down; SIGTERM if it is still there after 10 s
    kill -INT -- "-$ompi" 2>/dev/null
    for _ in $(seq 20); do kill -0 "$ompi" 2>/dev/null || break; sleep 0.5; done
    kill -TERM -- "-$ompi" 2>/dev/null
    rm -f "$log" "$CEILING_TEST_LOCK"
    exit 130
}
trap stop INT TERM
trap 'rm -f "$log" "$CEILING_TEST_LOCK"' EXIT
# shellcheck disable=SC2086
"$py" -m pytest -q -m serial ${PYTEST_ARGS:-}; keep $?
wait "$ompi"; keep $?
echo "--- the MPI tests again under Open MPI (scripts/test-openmpi.sh) ---"
cat "$log"
exit $rc
