"""Bring a run document of an older schema_version up to the current one.

``upgrade`` steps one version at a time (``_STEPS[n]`` turns version n into
n + 1), so a document of any older version reaches the current one through
every step in between, and each step is written once against the two shapes
it knows. Steps only add what the newer version has, with the value that
means "not recorded"; they never guess a figure.

The document is a plain dict (parsed JSON), not a Run: jsonio and the store
upgrade before Run.from_dict reads it.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Optional, Tuple

from . import profile, profile_cost
from .model import SCHEMA_VERSION


class MigrationError(ValueError):
    """A document that cannot be brought up to date."""


class NewerSchemaError(MigrationError):
    """A document written by a newer ceiling than this one."""


def version_of(doc: Any) -> int:
    """The document's schema_version; MigrationError when it has none or an invalid one."""
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise MigrationError("not a ceiling run (no schema_version)")
    v = doc["schema_version"]
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise MigrationError(f"invalid schema_version {v!r}")
    return v


def _v1_to_v2(doc: Dict[str, Any]) -> Dict[str, Any]:
    # v1 was always one node: every metric, finding and series is the host's ("").
    for m in doc.get("metrics", []):
        if isinstance(m, dict):
            m.setdefault("node", "")
    for f in doc.get("findings", []):
        if isinstance(f, dict):
            f.setdefault("node", "")
            f.setdefault("data", {})
    for s in doc.get("series", []):
        if isinstance(s, dict):
            s.setdefault("node", "")
    doc.setdefault("nodes", [])
    doc.setdefault("job", None)
    doc.setdefault("application", None)
    # Nothing was stored by the analysis in v1: the renderer computes it when empty.
    doc.setdefault("analysis", {"verdict": None, "roofline": None, "bounds": [], "uniformity": [],
                                "notes": [], "absent": [], "capacities": []})
    return doc


def _typed(cls, d: Any) -> Tuple[Optional[Dict[str, Any]], Dict[str, Any]]:
    """(the typed record's document, what it has no field for); (None, {}) for {} or None."""
    if not d:
        return None, {}
    if not isinstance(d, dict):
        raise MigrationError(f"expected an object for {cls.__name__}, not {type(d).__name__}")
    known, unread = profile.fit(cls, d, keep_unknown=False)
    return cls.from_dict(known).to_dict(), unread


def _v2_to_v3(doc: Dict[str, Any]) -> Dict[str, Any]:
    # The application section became typed: environment["profile"] moves to application.profile and
    # application.overhead becomes a record ({} = not measured: null). What the types have no field
    # for (a key an older ceiling wrote) is kept, untyped, in environment["v2_unread"].
    env = doc.get("environment") if isinstance(doc.get("environment"), dict) else {}
    app = doc.get("application")
    if not isinstance(app, dict):
        return doc
    unread = {}
    app["overhead"], left = _typed(profile_cost.Overhead, app.get("overhead"))
    if left:
        unread["overhead"] = left
    app.setdefault("profile", None)
    app.setdefault("calls", None)              # added to v3 later, with its default: a v3 document in full
    if isinstance(env.get("profile"), dict):
        app["profile"], left = _typed(profile.Profile, env.pop("profile"))
        if left:
            unread["profile"] = left
    if unread:
        env["v2_unread"] = unread
    return doc


# version n -> the step that turns an n document into an n + 1 one
_STEPS: Dict[int, Callable[[Dict[str, Any]], Dict[str, Any]]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
}


def upgrade(doc: Dict[str, Any]) -> Dict[str, Any]:
    """``doc`` as a current (SCHEMA_VERSION) document; ``doc`` itself is left unchanged.

    Raises NewerSchemaError for a document newer than this ceiling reads, and
    MigrationError (both ValueErrors) for one without a valid schema_version.
    """
    version = version_of(doc)
    if version > SCHEMA_VERSION:
        raise NewerSchemaError(f"written by a newer ceiling (schema {version}); "
                               f"this one reads up to {SCHEMA_VERSION}")
    if version == SCHEMA_VERSION:
        return doc
    doc = copy.deepcopy(doc)
    while version < SCHEMA_VERSION:
        doc = _STEPS[version](doc)
        version += 1
        doc["schema_version"] = version
    return doc
