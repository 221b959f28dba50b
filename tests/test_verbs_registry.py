"""Adding a verb and a format of its own is new files plus one line in verbs.VERBS.

The dummy verb below lives in a package written to a temporary directory: a
module with NAME, HELP, DESCRIPTION, configure and main, and an Exporter of its
own (a plain-text format). The only change to ceiling is the one registration
line, done here with monkeypatch; the command line, the delivery path and the
exit-code rules are ceiling's own.
"""
from __future__ import annotations

import sys
import textwrap

from ceiling import cli, verbs

DUMMY = textwrap.dedent('''
    """ceiling hello: a verb that measures nothing and writes its own format."""
    from ceiling.report.exporters.base import Exporter
    from ceiling.results.model import Metric
    from ceiling.verbs import common
    from ceiling.verbs.session import Session

    NAME = "hello"
    HELP = "say hello in a format of its own"
    DESCRIPTION = "A test verb."


    class Text(Exporter):
        what = "text file"

        def __init__(self, path):
            self.path = path

        def export(self, run):
            with open(self.path, "w") as f:
                f.write(f"{run.host} {len(run.metrics)} {run.analysis.verdict.kind}\\n")
            return f"text: {self.path}"


    def configure(p):
        p.add_argument("--to", required=True)
        common.output_options(p, store=False, html=False)


    def main(args, argv):
        session = Session(argv)
        session.run.metrics.append(Metric.measured("hello.value", [1.0, 2.0], "things"))
        run = session.finish()
        outputs = [Text(args.to)] + common.exporters(args, None, html=False, render=lambda r: "hello rendered")
        return common.deliver(run, outputs, 0, common.say(args))
''')


def test_a_new_verb_with_its_own_exporter_needs_one_registration_line(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "dummyverbs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "hello.py").write_text(DUMMY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(verbs, "VERBS", verbs.VERBS + ("dummyverbs.hello",))   # the one line

    out = tmp_path / "hello.txt"
    assert cli.main(["hello", "--to", str(out), "--save-json", str(tmp_path / "h.json")]) == 0
    said = capsys.readouterr().out
    assert "hello rendered" in said and f"text: {out}" in said
    host, n, verdict = out.read_text().split()
    assert n == "1" and verdict == "no_peak"          # analysed once, by the delivery path, before any exporter
    assert (tmp_path / "h.json").stat().st_size > 0

    assert "hello" in cli.build_parser().format_help()
    sys.modules.pop("dummyverbs.hello", None)
    sys.modules.pop("dummyverbs", None)


def test_every_registered_verb_has_the_interface():
    for name, mod in verbs.load().items():
        assert name == mod.NAME
        for attr in ("HELP", "DESCRIPTION", "configure", "main"):
            assert hasattr(mod, attr), f"verb {name} lacks {attr}"


def test_run_says_what_it_measures_and_that_it_takes_minutes():
    """'ceiling run' said "quick benchmarks" for a run of 140 s; it measures every suite of the
    node at full size (--quick is the shorter one), and storage only when asked for."""
    from ceiling.verbs import run, suites
    parser = cli.build_parser()
    listing = " ".join(parser.format_help().split())
    assert "quick benchmarks" not in listing and "the node's benchmarks (minutes)" in listing
    (sub,) = [a for a in parser._subparsers._group_actions]
    text = " ".join(sub.choices["run"].format_help().split())
    assert "quick benchmarks" not in text and "It takes minutes" in text
    assert "--quick a shorter run: fewer repetitions" in text
    assert [label for label, _ in suites.steps(["all"], False)][-1] == "core-to-core"      # as it says:
    assert "storage" not in suites.ORDER and "'bench storage'" in run.DESCRIPTION          # storage is apart
