"""Output paths, refused before anything is measured rather than after (the rules:
files/output.py)."""
from __future__ import annotations

from typing import Optional

from ...files import output


def check_writable(path: Optional[str], what: str) -> None:
    """Refuse an output path that cannot be written (one line, PathError); None passes."""
    output.check(path, what)
