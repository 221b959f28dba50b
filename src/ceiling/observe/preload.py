"""Whether the interposer can reach a program: LD_PRELOAD is read by the dynamic loader,
which a statically linked program does not have and a setuid or setgid one ignores it in."""
from __future__ import annotations

import os


def preload_refused(path: str) -> str:
    """Why LD_PRELOAD cannot reach ``path`` ("" when it can): a setuid or setgid program
    (the loader ignores it there) or a statically linked one (no loader at all). A script
    is run by its interpreter, which the loader does reach."""
    try:
        st = os.stat(path)
        if st.st_mode & 0o6000:
            return "it is setuid or setgid: the dynamic loader ignores LD_PRELOAD there"
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:2] == b"#!":
                return ""
            if head[:4] != b"\x7fELF" or len(head) < 64:
                return ""
            is64, little = head[4] == 2, head[5] == 1
            order = "little" if little else "big"
            if is64:
                phoff, phentsize, phnum = (int.from_bytes(head[32:40], order), int.from_bytes(head[54:56], order),
                                           int.from_bytes(head[56:58], order))
            else:
                phoff, phentsize, phnum = (int.from_bytes(head[28:32], order), int.from_bytes(head[42:44], order),
                                           int.from_bytes(head[44:46], order))
            f.seek(phoff)
            table = f.read(phentsize * min(phnum, 512))
        for i in range(0, len(table), phentsize):
            if int.from_bytes(table[i:i + 4], order) == 3:       # PT_INTERP: it has a dynamic loader
                return ""
        return "it is statically linked: no dynamic loader reads LD_PRELOAD"
    except OSError as e:
        return f"it cannot be read ({e.strerror})"
