"""The watchdog's side channel: UDP datagrams between the ranks of one MPI job, authenticated.

Rank 0's watchdog acts on what arrives (a rank that reports a stall can end the job), so a
datagram is acted on only when it comes from a rank of this job:

- At start, rank 0 draws a key (32 random bytes, ``secrets``) and a job nonce and sends both
  to the ranks over MPI, with its addresses (``watchdog.start``). They never leave the job.
- Each datagram is ``MAGIC | tag | rank | seq | payload``: the sender's rank, a sequence number
  that each rank increases with every datagram it sends (a resend is a new datagram), and the
  message as JSON. ``tag`` is HMAC-SHA256 under the key over ``nonce | rank | seq | payload``.
- The receiver checks the tag (``hmac.compare_digest``) before it reads anything else, then that
  the rank is one it hears from (the ranks at rank 0, rank 0 at the others), then that the
  sequence number is above the last one it accepted from that rank: a copy of a genuine datagram
  sent again later is a replay. A copy of the last one accepted (a rank sends each report to
  every address rank 0 gave it, so a multi-homed rank 0 gets it once per address) is passed
  over without a word: acting on it again would change nothing.
- Anything else is dropped and counted by reason (``REASONS``), never acted on; rank 0 says the
  count in the job's report (a finding) and in the line that ends a job.

The channel is not secret (the payload is readable on the wire); it only has to be genuine.
A sender that floods the port can still delay the reports, as it could any UDP port.
"""
from __future__ import annotations

import hmac
import json
import secrets
import struct
import threading
from collections import Counter
from hashlib import sha256
from typing import Any, Collection, Dict, Optional, Tuple

KEY_BYTES = 32
NONCE_BYTES = 16
MAGIC = b"cwd1"                          # ceiling watchdog datagram, format 1
HEADER = struct.Struct("!IQ")            # rank, sequence number
TAG_BYTES = sha256().digest_size
MAX_DATAGRAM = 4096                      # a genuine one is a few hundred bytes
BAD_MAC, REPLAY, MALFORMED, UNKNOWN_RANK = "bad MAC", "replay", "malformed", "unknown rank"
REASONS = (BAD_MAC, REPLAY, MALFORMED, UNKNOWN_RANK)


def new_secret() -> Tuple[bytes, bytes]:
    """A job's key and nonce (rank 0, once; the ranks get them over MPI)."""
    return secrets.token_bytes(KEY_BYTES), secrets.token_bytes(NONCE_BYTES)


class Channel:
    """One rank's end: seals what it sends, opens what it receives, counts what it drops."""

    def __init__(self, key: bytes, nonce: bytes, rank: int) -> None:
        self.key, self.nonce, self.rank = key, nonce, rank
        self._seq = 0
        self._lock = threading.Lock()     # two threads send: the watchdog and the main thread
        self._last: Dict[int, int] = {}   # sender -> the last sequence number accepted from it
        self._last_tag: Dict[int, bytes] = {}   # sender -> that datagram's tag (its copies are no replay)
        self.duplicates = 0               # copies of an accepted datagram (a rank sends to every address)
        self.dropped: Counter = Counter()   # reason -> datagrams dropped

    def _tag(self, header: bytes, payload: bytes) -> bytes:
        return hmac.new(self.key, self.nonce + header + payload, sha256).digest()

    def seal(self, msg: Dict[str, Any]) -> Tuple[bytes, int]:
        """The datagram for ``msg`` from this rank, and its sequence number."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        header = HEADER.pack(self.rank, seq)
        payload = json.dumps(msg).encode()
        return MAGIC + self._tag(header, payload) + header + payload, seq

    def open(self, data: bytes, senders: Collection[int]) -> Optional[Tuple[int, int, Dict[str, Any]]]:
        """(rank, seq, message) of a genuine datagram from one of ``senders``; None, counted, for
        anything else. Never raises on what arrives."""
        start = len(MAGIC) + TAG_BYTES
        if not isinstance(data, bytes) or len(data) > MAX_DATAGRAM or len(data) < start + HEADER.size \
                or not data.startswith(MAGIC):
            return self._drop(MALFORMED)
        tag, header, payload = data[len(MAGIC):start], data[start:start + HEADER.size], data[start + HEADER.size:]
        if not hmac.compare_digest(tag, self._tag(header, payload)):
            return self._drop(BAD_MAC)
        rank, seq = HEADER.unpack(header)
        if rank not in senders:
            return self._drop(UNKNOWN_RANK)
        if seq == self._last.get(rank, 0) and hmac.compare_digest(tag, self._last_tag.get(rank, b"")):
            self.duplicates += 1        # the same report sent to each of rank 0's addresses: no attack
            return None
        if seq <= self._last.get(rank, 0):
            return self._drop(REPLAY)
        try:
            msg = json.loads(payload.decode())
        except (ValueError, RecursionError):     # UnicodeDecodeError and JSONDecodeError are ValueErrors
            return self._drop(MALFORMED)
        if not isinstance(msg, dict) or not isinstance(msg.get("t"), str):
            return self._drop(MALFORMED)
        self._last[rank], self._last_tag[rank] = seq, tag
        return rank, seq, msg

    def _drop(self, reason: str) -> None:
        self.dropped[reason] += 1
        return None

    def drops(self) -> Dict[str, int]:
        """Datagrams dropped so far, by reason (the reasons met only)."""
        return {r: self.dropped[r] for r in REASONS if self.dropped[r]}

    def dropped_text(self) -> str:
        """The drops in words ("" when none): for rank 0's line and finding."""
        drops = self.drops()
        if not drops:
            return ""
        n = sum(drops.values())
        return (f"the MPI watchdog's side channel dropped {n} datagram{'s' if n > 1 else ''} not from this "
                f"job's ranks ({', '.join(f'{r}: {c}' for r, c in drops.items())}); none was acted on")
