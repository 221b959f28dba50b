"""Exporters: one per output format of a Run, on one base (base.py).

Today: the terminal (terminal.py), the JSON document to a file or to stdout
(json_doc.py), the single-file HTML report (html_file.py) and the SQLite
history (history.py). A new format (Perfetto, OTF2, Prometheus) is a new file
here with one Exporter subclass; the verbs hand their exporters to
``base.deliver``, which runs them in one order and never lets one failure
stop the others.
"""
