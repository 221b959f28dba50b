"""The studies in the history (store version 4, store_schema.py): the rows a study becomes and the
list ``ceiling history --studies`` shows; results/store.py runs them inside its transactions."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .model import Study

# The study a run is a member of (the first by id, where it is a member of several), as a column of
# a query over ``runs r``.
OF_RUN = "(SELECT s.study_id FROM study_members s WHERE s.run_id = r.run_id ORDER BY s.study_id LIMIT 1)"


@dataclass(frozen=True)
class StudySummary:
    """One line of ``ceiling history --studies``."""

    study_id: str
    kind: str
    parameter: str
    host: str
    started: str
    finished: str
    tool_version: str
    partial: bool
    members: int
    values: List[Any] = field(default_factory=list)       # each member's value of the parameter, in order
    command: List[str] = field(default_factory=list)      # the command line that made it


def save(db: sqlite3.Connection, study: Study, doc: str) -> None:
    """The study's row (its document ``doc``, members by run_id) and one row per member, replacing
    an earlier save of its study_id; the member runs are written by the caller."""
    db.execute("DELETE FROM study_members WHERE study_id = ?", (study.study_id,))
    db.execute("INSERT OR REPLACE INTO studies (study_id, kind, parameter, host, started, finished, "
               "tool_version, partial, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (study.study_id, study.kind, study.parameter, study.host, study.started, study.finished,
                study.tool_version, int(study.partial), doc))
    db.executemany("INSERT INTO study_members (study_id, position, run_id, value) VALUES (?, ?, ?, ?)",
                   [(study.study_id, i, m.run_id, json.dumps(m.value)) for i, m in enumerate(study.members)])


def summaries(db: sqlite3.Connection, host: Optional[str], limit: int) -> List[StudySummary]:
    """The newest ``limit`` studies (started on ``host`` when given), newest first."""
    where, args = ("WHERE host = ?", [host]) if host is not None else ("", [])
    command = "CASE WHEN json_valid(doc) THEN json_extract(doc, '$.command') END"
    rows = db.execute(f"SELECT study_id, kind, parameter, host, started, finished, tool_version, partial, "
                      f"{command} FROM studies {where} ORDER BY started DESC, study_id LIMIT ?",
                      args + [int(limit)]).fetchall()
    values: Dict[str, List[Any]] = {r[0]: [] for r in rows}
    if rows:
        for sid, value in db.execute(f"SELECT study_id, value FROM study_members WHERE study_id IN "
                                     f"({','.join('?' * len(rows))}) ORDER BY study_id, position",
                                     [r[0] for r in rows]):
            values[sid].append(_json(value))
    return [StudySummary(sid, kind, par, h, st, fin, v, bool(p), len(values[sid]), values[sid], _words(c))
            for sid, kind, par, h, st, fin, v, p, c in rows]


def _json(text: Optional[str]) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _words(text: Optional[str]) -> List[str]:
    words = _json(text)
    return [w for w in words if isinstance(w, str)] if isinstance(words, list) else []
