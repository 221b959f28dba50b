"""Output paths, refused before anything is measured rather than after."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ...errors import PathError


def check_writable(path: Optional[str], what: str) -> None:
    """Refuse an output path that cannot be written (one line, PathError); None passes."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise PathError(f"{what} {path}: is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise PathError(f"{what} {path}: directory {parent} does not exist")
    # Try it: access() says yes to root even where the file system says no (/proc, read-only mounts).
    existed = p.exists()
    try:
        with open(p, "a"):
            pass
    except OSError as e:
        raise PathError(f"{what} {path}: not writable ({e.strerror})") from None
    if not existed:
        p.unlink(missing_ok=True)       # another process checking the same path may have removed it
