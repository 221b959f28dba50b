"""Prints what a Python program can see of its process (for
tests/test_interpose_transparent.py, which runs it with and without the
interposer): every signal as signal.getsignal reports it, the save-and-restore
pattern, fd numbers, errno, a fork + os._exit child, an exec that fails, and
the exit status or death by a signal the first argument asks for."""
import errno
import os
import signal
import sys

for s in range(1, signal.NSIG):
    try:
        print("start", s, repr(signal.getsignal(s)))
    except ValueError as e:
        print("start", s, "ValueError", e)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
    old = signal.getsignal(s)
    signal.signal(s, old)                 # the pattern that raised TypeError under the old interposer
    print("restore", s, repr(signal.getsignal(s)))
    print("set", s, repr(signal.signal(s, signal.SIG_DFL)), repr(signal.getsignal(s)))
a, b = os.open("/dev/null", os.O_RDONLY), os.open("/dev/null", os.O_RDONLY)
os.close(a)
print("fds", a, b, os.open("/dev/null", os.O_RDONLY))
for call in (lambda: os.close(999), lambda: os.open("/nonexistent/x", os.O_RDONLY),
             lambda: os.execv("/nonexistent/x", ["x"])):
    try:
        call()
    except OSError as e:
        print("errno", errno.errorcode[e.errno])
sys.stdout.flush()
pid = os.fork()
if pid == 0:
    os.write(1, b"child here\n")
    os._exit(7)
print("child status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
sys.stdout.flush()
mode = sys.argv[1] if len(sys.argv) > 1 else "exit"
if mode == "term":
    os.kill(os.getpid(), signal.SIGTERM)
if mode == "_exit":
    os._exit(4)
sys.exit(3)
