"""ceiling's metrics for Prometheus, with the official client (prometheus_client): its exposition
format and its histogram semantics (cumulative ``_bucket{le=...}``, ``_sum``, ``_count``), as
Prometheus, node_exporter and Grafana expect them. Two users: the probe (``Exporter``, below) and the
headline of a measured run (``write_run``: ``ceiling run/check/bench --textfile DIR``). Both write
node_exporter's textfile through ``write_textfile``: a temporary file in the same directory (a name
node_exporter skips: it reads ``*.prom`` only), flushed to disk, renamed over the old one, removed on
any exception (a Ctrl-C included): the file is the old one or the new one, whole.

The probe:

Served over HTTP (``--listen``, 127.0.0.1:9464 by default: binding elsewhere must be asked for),
written for node_exporter's textfile collector (``--textfile DIR``: ``DIR/ceiling_probe.prom``,
written to a temporary file and renamed), or both. One label, ``op`` (six values): the cardinality
is bounded; the node is Prometheus's ``instance``.

- ``ceiling_probe_latency_seconds{op}``: histogram of every successful operation;
- ``ceiling_probe_slowdown_ratio{op}``: the last window's median / baseline median (absent until
  there is a baseline);
- ``ceiling_probe_errors_total{op}``: operations that failed (the file system away, full, stale);
- ``ceiling_probe_window_p99_seconds{op}``: the last window's p99.
"""
from __future__ import annotations

import errno
import os
from typing import Callable, Optional, Sequence, Tuple

from ..errors import PathError, PortInUseError, UsageError

TEXTFILE = "ceiling_probe.prom"
# 1 us (a cached stat) to 60 s (a file system that hangs), about three buckets a decade
BUCKETS = (1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05,
           0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def check_textfile_dir(textfile_dir: str) -> None:
    """A textfile directory that is not one, or that this user cannot write: one line (PathError, exit 4)."""
    if not os.path.isdir(textfile_dir):
        raise PathError(f"--textfile {textfile_dir}: not a directory")
    if not os.access(textfile_dir, os.W_OK | os.X_OK):
        raise PathError(f"--textfile {textfile_dir}: not writable")


def write_textfile(path: str, content) -> None:
    """``content`` (a page's bytes, or a prometheus_client registry in the exposition format) at
    ``path``, whole or not at all (module docstring): a reader, node_exporter, sees the old page or
    the new one; a SIGTERM mid-write leaves the old one and no temporary file."""
    import tempfile
    if isinstance(content, (bytes, bytearray)):
        body = bytes(content)
    else:
        from prometheus_client import generate_latest
        body = generate_latest(content)
    d, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=d or ".", prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())         # the rename must not reach the disk before the text (a crash: an empty file)
        os.chmod(tmp, 0o644)             # node_exporter runs as its own user; mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def parse_listen(text: str) -> Optional[Tuple[str, int]]:
    """'127.0.0.1:9464', '[::1]:9464', ':9464' (all addresses: asked for) -> (host, port); 'off' -> None."""
    if text.strip().lower() in ("off", "none", "no"):
        return None
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--listen {text!r}: not ADDRESS:PORT (examples: 127.0.0.1:9464, :9464, off)")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def textfile_path(textfile_dir: Optional[str], name: str) -> Optional[str]:
    """DIR/name for --textfile DIR, after checking DIR can take it; None without --textfile."""
    if textfile_dir is None:
        return None
    check_textfile_dir(textfile_dir)
    return os.path.join(textfile_dir, name)


def serve(listen: Optional[Tuple[str, int]], registry):
    """prometheus_client's HTTP server for ``registry`` on ``listen`` (a thread); None for --listen off."""
    if listen is None:
        return None
    from prometheus_client import start_http_server
    try:
        server, _ = start_http_server(listen[1], addr=listen[0], registry=registry)
        return server
    except OSError as e:
        raise _listen_error(listen, e) from None


def serve_page(listen: Optional[Tuple[str, int]], page: Callable[[], bytes]):
    """An HTTP server on ``listen`` (a thread) whose /metrics is ``page()``, a page already in the
    exposition format (the monitor's: report/prometheus_monitor.py); None for --listen off."""
    if listen is None:
        return None
    import http.server
    import socket
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:              # noqa: N802 - http.server's name
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = page()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in listen[0] else socket.AF_INET
    try:
        server = Server((listen[0], listen[1]), Handler)
    except OSError as e:
        raise _listen_error(listen, e) from None
    threading.Thread(target=server.serve_forever, name="ceiling-metrics", daemon=True).start()
    return server


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _listen_error(listen: Tuple[str, int], e: OSError) -> PortInUseError:
    where = f"{listen[0]}:{listen[1]}"
    if e.errno == errno.EADDRINUSE:
        return PortInUseError(f"--listen {where}: the port is in use (another exporter? give "
                              "another port, or --listen off)")
    return PortInUseError(f"--listen {where}: cannot listen there: {e.strerror or e}")


def stop(server) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()


class Exporter:
    def __init__(self, listen: Optional[Tuple[str, int]], textfile_dir: Optional[str], ops: Sequence[str] = ()):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram("ceiling_probe_latency_seconds", "One probe operation's latency",
                                 ["op"], buckets=BUCKETS, registry=self.registry)
        self.slowdown = Gauge("ceiling_probe_slowdown_ratio", "Last window's median latency / baseline median",
                              ["op"], registry=self.registry)
        self.p99 = Gauge("ceiling_probe_window_p99_seconds", "Last window's p99 latency", ["op"],
                         registry=self.registry)
        self.errors = Counter("ceiling_probe_errors", "Probe operations that failed", ["op"],
                              registry=self.registry)
        for op in ops:                       # every series there from the start: a panel of errors is 0, not empty
            self.latency.labels(op=op)
            self.errors.labels(op=op)
        self.textfile = textfile_path(textfile_dir, TEXTFILE)
        self.server = serve(listen, self.registry)

    def observe(self, op: str, seconds: float) -> None:
        self.latency.labels(op=op).observe(seconds)

    def failed(self, op: str) -> None:
        self.errors.labels(op=op).inc()

    def window(self, op: str, slowdown: Optional[float], p99: Optional[float]) -> None:
        if slowdown is not None:
            self.slowdown.labels(op=op).set(slowdown)
        if p99 is not None:
            self.p99.labels(op=op).set(p99)

    def flush(self) -> None:
        """The textfile, atomically (write_textfile)."""
        if self.textfile:
            write_textfile(self.textfile, self.registry)

    def close(self) -> None:
        stop(self.server)
        self.server = None
