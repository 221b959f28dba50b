"""Paths someone else controls (issue 25, items 1 and 3): a report path that is a device,
a FIFO or a link; a $TMPDIR, an XDG_DATA_HOME or a record directory another user can
write in. ceiling usually runs as root on nodes, so the hostile cases are played as
root against a directory that ``nobody`` owns or writes (setpriv), and skip elsewhere.

Device nodes are scratch ones made with mknod in the test's directory (c 1 3 is what
/dev/null is, c 1 7 /dev/full, b 7 N a loop device that does not exist): the real
/dev/null is never a target.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from ceiling import core
from ceiling.errors import PathError
from ceiling.files import output, private
from ceiling.report import html
from ceiling.results import jsonio
from ceiling.results.store import Store

import sample_runs
from reporting import analysed

GOLDEN = Path(__file__).resolve().parent / "golden"
ROOT = os.geteuid() == 0
NOBODY = 65534
SETPRIV = shutil.which("setpriv")
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
needs_root = pytest.mark.skipif(not ROOT, reason="making device nodes and playing another user need root")
needs_nobody = pytest.mark.skipif(not ROOT or not SETPRIV, reason="playing the user nobody needs root and setpriv")

WRITERS = {
    "json": lambda path: jsonio.dump(sample_runs.vm_run(), path),
    "html": lambda path: html.write(analysed(sample_runs.vm_run()), path),
}


def ceiling(*args, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True,
                          env=e, timeout=timeout)


def mknod(path: Path, kind: int, major: int, minor: int) -> Path:
    os.mknod(path, 0o644 | kind, os.makedev(major, minor))
    if kind == stat.S_IFCHR:
        try:
            os.close(os.open(path, os.O_WRONLY))
        except OSError as e:
            pytest.skip(f"device nodes cannot be opened here ({e.strerror}: a nodev mount)")
    return path


def unused_loop(tmp: Path) -> Path:
    """A block node for a loop device this machine does not have (never opened)."""
    minor = next(m for m in range(255, 0, -1) if not os.path.exists(f"/sys/dev/block/7:{m}"))
    return mknod(tmp / "disk", stat.S_IFBLK, 7, minor)


def kind(path: Path) -> str:
    m = os.lstat(path).st_mode
    return ("link" if stat.S_ISLNK(m) else "char" if stat.S_ISCHR(m) else "block" if stat.S_ISBLK(m)
            else "fifo" if stat.S_ISFIFO(m) else "dir" if stat.S_ISDIR(m) else "file")


@pytest.fixture
def open_dir():
    """A scratch directory under /tmp that nobody can reach (pytest's own is 0700 root's)."""
    d = Path(tempfile.mkdtemp(prefix="ceiling-test-hostile-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def secret(open_dir):
    """A root-only file a hostile link points at; its text must never change."""
    vault = open_dir / "vault"
    vault.mkdir(mode=0o700)
    f = vault / "secret"
    f.write_text("secret\n")
    f.chmod(0o600)
    return f


def nobody(*argv):
    subprocess.run([*AS_NOBODY, *argv], check=True, capture_output=True, timeout=30)


def nobodys_dir(path: Path, mode: int = 0o755) -> Path:
    path.mkdir()
    os.chown(path, NOBODY, NOBODY)
    path.chmod(mode)
    return path


# -- item 1: the report path -----------------------------------------------------------

@needs_root
@pytest.mark.parametrize("what", sorted(WRITERS))
def test_a_character_device_is_written_through_not_replaced(tmp_path, what):
    null = mknod(tmp_path / "null", stat.S_IFCHR, 1, 3)
    WRITERS[what](null)
    assert kind(null) == "char" and os.stat(null).st_rdev == os.makedev(1, 3)
    assert sorted(os.listdir(tmp_path)) == ["null"]          # no temporary file left


@needs_root
def test_a_full_device_is_one_line_and_stays_a_device(tmp_path):
    full = mknod(tmp_path / "full", stat.S_IFCHR, 1, 7)
    with pytest.raises(PathError, match="No space left on device") as e:
        jsonio.dump(sample_runs.vm_run(), full)
    assert "\n" not in str(e.value) and kind(full) == "char"


@needs_root
def test_a_link_to_a_device_is_resolved_and_kept(tmp_path):
    mknod(tmp_path / "null", stat.S_IFCHR, 1, 3)
    (tmp_path / "out.json").symlink_to("null")
    jsonio.dump(sample_runs.vm_run(), tmp_path / "out.json")
    assert kind(tmp_path / "out.json") == "link" and kind(tmp_path / "null") == "char"


def test_a_link_to_a_file_replaces_the_file_not_the_link(tmp_path):
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "out.json").symlink_to("real.json")
    jsonio.dump(sample_runs.vm_run(), tmp_path / "out.json")
    assert kind(tmp_path / "out.json") == "link"
    assert (tmp_path / "real.json").read_text() == jsonio.dumps(sample_runs.vm_run())


@pytest.mark.parametrize("what", sorted(WRITERS))
def test_a_fifo_with_a_reader_gets_the_document(tmp_path, what):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    WRITERS[what](fifo)
    reader.join(30)
    assert kind(fifo) == "fifo" and sorted(os.listdir(tmp_path)) == ["fifo"]
    assert got and (got[0].startswith(b"{") if what == "json" else got[0].startswith(b"<!DOCTYPE html>"))


def test_a_fifo_without_a_reader_is_given_up(tmp_path, monkeypatch):
    monkeypatch.setattr(output, "FIFO_WAIT_S", 0.3)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(PathError, match="no process read within 0.3 s") as e:
        jsonio.dump(sample_runs.vm_run(), fifo)
    assert "\n" not in str(e.value) and kind(fifo) == "fifo" and sorted(os.listdir(tmp_path)) == ["fifo"]


def test_the_preflight_does_not_open_a_fifo(tmp_path):
    """Opening it would wait for a reader (before: the verb hung) or hand one an end of file."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-c", "from ceiling.report.exporters.paths import check_writable; "
                        f"check_writable({str(fifo)!r}, '--save-json')"], timeout=30)
    assert r.returncode == 0 and kind(fifo) == "fifo"


@needs_root
@pytest.mark.parametrize("what", sorted(WRITERS))
def test_a_block_device_is_refused(tmp_path, what):
    disk = unused_loop(tmp_path)
    with pytest.raises(PathError, match="block device") as e:
        output.check(str(disk), "--out")
    assert "\n" not in str(e.value)
    with pytest.raises(PathError, match="block device"):
        WRITERS[what](disk)
    assert kind(disk) == "block" and sorted(os.listdir(tmp_path)) == ["disk"]


@needs_root
def test_the_verbs_write_through_and_refuse_in_one_line(tmp_path):
    run = str(GOLDEN / "run_v2.json")
    disk = unused_loop(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    (tmp_path / "stdout").symlink_to("/proc/self/fd/1")
    r = ceiling("show", run, "--out", str(tmp_path / "stdout"), env=env)
    assert r.returncode == 0 and "<!DOCTYPE html>" in r.stdout, r.stderr
    assert kind(tmp_path / "stdout") == "link"
    for args in (["show", run, "--out", str(disk)], ["machine", "--no-measure", "--save-json", str(disk)],
                 ["history", "--db", str(fifo)], ["check", "--only", "os", "--db", str(disk)]):
        r = ceiling(*args, env=env, timeout=60)
        lines = [x for x in r.stderr.splitlines() if x.strip() and not x.endswith("...")]
        assert r.returncode == 4 and len(lines) == 1 and lines[0].startswith("ceiling: "), (args, r.stderr)
    assert kind(disk) == "block" and kind(fifo) == "fifo"


def test_show_to_a_fifo_nobody_reads_ends_with_exit_4(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = ceiling("show", str(GOLDEN / "run_v2.json"), "--out", str(fifo), env={"XDG_DATA_HOME": str(tmp_path)},
                timeout=60)
    assert r.returncode == 4 and "no process read within 10 s" in r.stderr, r.stderr
    assert kind(fifo) == "fifo"


# -- item 3: the directories ceiling makes ----------------------------------------------

@needs_root
def test_a_tmpdir_of_another_user_is_stepped_around(open_dir, monkeypatch, capsys):
    evil = nobodys_dir(open_dir / "evil")
    monkeypatch.setattr(tempfile, "tempdir", str(evil))
    monkeypatch.setattr(private, "_chosen", {})
    with private.temporary_dir("ceiling-profile-") as d:
        assert not d.startswith(str(evil)) and stat.S_IMODE(os.lstat(d).st_mode) == 0o700
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "not using" in err[0] and "owned by uid 65534" in err[0]


@needs_root
def test_profile_keeps_its_records_out_of_a_tmpdir_of_another_user(open_dir, tmp_path, interposer_library):
    """Before: the record directory was made in that $TMPDIR, and its owner could swap it
    for links the interposer (root) then appended through."""
    evil = nobodys_dir(open_dir / "evil")
    r = ceiling("profile", "--no-store", "--no-measure", "--", "sh", "-c", "echo \"$CEILING_INTERPOSE_OUT\"",
                env={"TMPDIR": str(evil), "XDG_DATA_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    where = r.stdout.strip().splitlines()[0]
    assert "ceiling-profile-" in where and not where.startswith(str(evil)), where
    assert f"not using {evil}" in r.stderr and os.listdir(evil) == []


@needs_root
def test_the_storage_run_directory_is_never_made_where_another_user_can_swap_it(open_dir, monkeypatch, capsys):
    from ceiling.bench.storage_dir import RunDir
    evil = nobodys_dir(open_dir / "evil")
    with pytest.raises(PathError, match="owned by uid 65534") as e:
        with RunDir(str(evil)):
            pass
    assert "\n" not in str(e.value) and os.listdir(evil) == []
    shared = open_dir / "shared"           # writable by everyone, not sticky
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(PathError, match="without the sticky bit"):
        with RunDir(str(shared)):
            pass
    monkeypatch.setattr(tempfile, "tempdir", str(evil))       # the default parent: stepped around
    monkeypatch.setattr(private, "_chosen", {})
    with RunDir(None) as rd:
        assert not rd.path.startswith(str(evil))
    assert os.listdir(evil) == []


def test_a_run_directory_swapped_for_a_link_is_unlinked_not_followed(tmp_path):
    from ceiling.bench.storage_dir import OWNER_FILE, RunDir
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / OWNER_FILE).write_text("someone else's\n")
    with RunDir(str(tmp_path)) as rd:
        os.rename(rd.path, tmp_path / "moved")
        os.symlink(elsewhere, rd.path)
    assert not os.path.lexists(rd.path)
    assert (elsewhere / OWNER_FILE).read_text() == "someone else's\n"


def test_remove_tree_never_follows_a_link(tmp_path):
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "keep").write_text("x")
    d = tmp_path / "made"
    d.mkdir()
    (d / "link").symlink_to(tmp_path / "target")
    private.remove_tree(str(d))
    (tmp_path / "swapped").symlink_to(tmp_path / "target")
    private.remove_tree(str(tmp_path / "swapped"))
    assert not d.exists() and not os.path.lexists(tmp_path / "swapped")
    assert (tmp_path / "target" / "keep").read_text() == "x"


def _record(tmp_path, out: Path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONFAULTHANDLER", "LD_PRELOAD")}
    env.update(LD_PRELOAD=str(core.interpose_library_path()), CEILING_INTERPOSE_OUT=str(out))
    return subprocess.run([shutil.which("true")], env=env, capture_output=True, text=True, timeout=60)


@needs_nobody
@pytest.mark.parametrize("where", ["nobodys", "sticky"])
def test_the_interposer_never_writes_through_a_planted_link(open_dir, secret, tmp_path, where,
                                                           interposer_library):
    """As root, into a directory nobody owns, or a sticky one everyone can write (as /tmp),
    where nobody planted the record's name as a link to a root-only file."""
    d = nobodys_dir(open_dir / "d") if where == "nobodys" else open_dir / "d"
    if where == "sticky":
        d.mkdir()
        d.chmod(0o1777)
    nobody("ln", "-s", str(secret), str(d / "rec"))
    r = _record(tmp_path, d / "rec")
    assert secret.read_text() == "secret\n", "the record went through nobody's link"
    # the open is refused (ELOOP; some kernels answer EACCES for O_CREAT there) and said in one line
    assert r.stderr.startswith("ceiling interpose: ") and r.stderr.count("\n") == 1, r.stderr


@needs_nobody
def test_the_interposer_never_appends_to_a_file_of_another_user(open_dir, tmp_path, interposer_library):
    d = open_dir / "d"
    d.mkdir()
    d.chmod(0o1777)
    nobody("sh", "-c", f"umask 0; : > {d / 'rec'}")
    r = _record(tmp_path, d / "rec")
    assert (d / "rec").read_text() == "" and "not writing the record" in r.stderr, r.stderr
    ok = tmp_path / "own"                 # its own directory: written as before
    ok.mkdir(mode=0o700)
    assert _record(tmp_path, ok / "rec").returncode == 0
    assert (ok / "rec").read_text().startswith("ceiling-interpose 1\n")
    assert stat.S_IMODE(os.stat(ok / "rec").st_mode) == 0o600


@needs_nobody
@pytest.mark.parametrize("mode", [0o1777, 0o777])
@pytest.mark.parametrize("readonly", [False, True])
def test_a_planted_history_directory_is_refused(open_dir, mode, readonly, monkeypatch):
    vault = open_dir / "vault"
    vault.mkdir(mode=0o700)
    share = open_dir / "share"
    share.mkdir()
    share.chmod(mode)
    nobody("ln", "-s", str(vault), str(share / "ceiling"))
    monkeypatch.setenv("XDG_DATA_HOME", str(share))
    with pytest.raises(PathError, match="refusing the history directory") as e:
        Store(readonly=readonly).close()
    assert "\n" not in str(e.value) and os.listdir(vault) == []


def test_a_history_link_of_ones_own_is_followed(tmp_path, monkeypatch):
    (tmp_path / "scratch").mkdir()
    (tmp_path / "share").mkdir(mode=0o755)
    (tmp_path / "share" / "ceiling").symlink_to(tmp_path / "scratch")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    Store().close()
    assert (tmp_path / "scratch" / "history.db").is_file()


@needs_nobody
def test_the_report_beside_the_history_never_goes_through_a_planted_link(open_dir, tmp_path, monkeypatch):
    """Where the working directory cannot be written, the report goes beside the history:
    through the same check (before: into whatever nobody's ``ceiling`` link named)."""
    from ceiling.report.exporters.html_file import HtmlFile
    vault = open_dir / "vault"
    vault.mkdir(mode=0o700)
    share = open_dir / "share"
    share.mkdir()
    share.chmod(0o1777)
    nobody("ln", "-s", str(vault), str(share / "ceiling"))
    monkeypatch.setenv("XDG_DATA_HOME", str(share))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "access", lambda *a, **k: False)        # root may write anywhere: play a user
    with pytest.raises(PathError, match="refusing the history directory"):
        HtmlFile().export(analysed(sample_runs.vm_run()))
    assert os.listdir(vault) == [] and os.listdir(tmp_path) == []


# -- after review: the name is looked at once; links only where no one else could plant them ----

@needs_nobody
def test_a_link_another_user_planted_is_refused_not_followed(open_dir, secret):
    """Before: realpath after a stat followed nobody's link, and the report was renamed over its
    target (a root-only file here)."""
    d = open_dir / "nobodys"
    d.mkdir()
    os.chown(d, NOBODY, NOBODY)
    nobody("ln", "-s", str(secret), str(d / "r.json"))
    for w in WRITERS.values():
        with pytest.raises(PathError, match="symbolic link another user could have made"):
            w(d / "r.json")
    with pytest.raises(PathError, match="symbolic link another user could have made"):
        output.check(str(d / "r.json"), "--out")
    assert secret.read_text() == "secret\n" and kind(d / "r.json") == "link"


@needs_root
def test_a_link_planted_after_the_name_was_looked_at_is_never_followed(open_dir, secret, monkeypatch):
    """The race the reviewer played: nobody's link appears in a sticky /tmp-like directory right
    after ceiling first looked at the name. Before, a stat then an islink/realpath followed it and
    the report was renamed over the target; now the target is untouched (the link refused, or
    renamed over)."""
    open_dir.chmod(0o1777)
    out = open_dir / "r.json"
    real, planted = {"stat": os.stat, "lstat": os.lstat}, []

    def looking(name):
        def look(p, *a, **k):
            try:
                return real[name](p, *a, **k)
            finally:
                if not planted and os.fspath(p) == str(out):
                    planted.append(1)
                    os.symlink(secret, out)         # planted right after the first look at the name
                    os.lchown(out, NOBODY, NOBODY)
        return look
    monkeypatch.setattr(output.os, "stat", looking("stat"))
    monkeypatch.setattr(output.os, "lstat", looking("lstat"))
    try:
        jsonio.dump(sample_runs.vm_run(), out)
    except PathError:
        pass
    monkeypatch.undo()
    assert planted and secret.read_text() == "secret\n"


def test_a_fifo_swapped_for_a_file_is_not_written(tmp_path, monkeypatch):
    """Before: the FIFO was reopened by name for up to 10 s, following links and accepting a
    regular file, whose first bytes the report then overwrote."""
    victim = tmp_path / "victim"
    victim.write_text("root:x:0:0:root:/root:/bin/bash\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real_sleep = output.time.sleep

    def swap(s):
        if kind(fifo) == "fifo":
            fifo.unlink()
            fifo.symlink_to(victim)
        real_sleep(s)
    monkeypatch.setattr(output.time, "sleep", swap)
    with pytest.raises(PathError):
        jsonio.dump(sample_runs.vm_run(), fifo)
    assert victim.read_text() == "root:x:0:0:root:/root:/bin/bash\n"
    fifo.unlink()
    fifo.write_text("x" * 10)                     # swapped for a regular file: refused, not written
    st = os.lstat(victim)
    monkeypatch.setattr(output, "resolve", lambda p: (str(fifo), output.THROUGH, os.stat_result(
        (stat.S_IFIFO | 0o600,) + tuple(st)[1:])))
    with pytest.raises(PathError, match="replaced while ceiling opened it"):
        jsonio.dump(sample_runs.vm_run(), fifo)
    assert fifo.read_text() == "x" * 10


def test_dev_stdout_redirected_to_a_log_is_appended_to_not_replaced(tmp_path):
    """Before: /dev/stdout resolved to the redirected file, which was renamed over: the log's
    earlier lines and everything printed after were lost."""
    log = tmp_path / "log.txt"
    log.write_text("earlier\n")
    code = ("import sys; print('before', flush=True); from ceiling.results import jsonio; import sample_runs; "
            "jsonio.dump(sample_runs.vm_run(), '/dev/stdout'); print('after', flush=True)")
    with open(log, "a") as f:
        r = subprocess.run([sys.executable, "-c", code], stdout=f, stderr=subprocess.PIPE, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=str(Path(__file__).parent)))
    assert r.returncode == 0, r.stderr
    text = log.read_text()
    assert text.startswith("earlier\nbefore\n{") and text.endswith("}\nafter\n"), text[:80]
