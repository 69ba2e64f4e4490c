"""`AckLedger`: what a host has acknowledged, written before the acknowledgement leaves it.

An ``add`` without ``durable=True`` returns once its messages are in the host's buffer; they
reach the store within the debounce window. If the host process is killed in between (SIGKILL,
OOM), those messages are gone — that is the documented price of the fast acknowledgement — but
two things must not happen: the loss must not be silent, and a seq already given to a lost
message must not be given to another one after the restart.

So before ``add`` returns, the host appends ``(conversation, message id, seq)`` of every message
it acknowledges to this ledger, one line per conversation per call, with one ``write`` system
call. The bytes are in the kernel's page cache when ``write`` returns, so they survive the death
of the process (not a power cut: no fsync, which would cost milliseconds per add). When the host
starts again it reads the ledger (:meth:`AckLedger.read`), asks the store which of those messages
it holds, records the others as ``lost`` dead letters — raising each conversation's ``last_seq``
over them — and reports them; then the ledger starts afresh (:meth:`AckLedger.reset`).

The ledger only needs what is not yet durable: when it grows past ``compact_bytes`` the host
rewrites it with the records of its still-unsettled messages (:meth:`AckLedger.rewrite`, atomic),
and an erasure rewrites it without the erased user. File: ``<root>/hosts/host-<i>.ledger``. On a
cluster the data directory must be on storage every node sees for a restarted host to find its
ledger (as the erasure scans already require).

Format: one line per ``append`` (and the whole file on a rewrite), each a JSON array of
``[app, user_id, conversation_id, [[id, seq], ...]]``; a line cut short by a kill is skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import NamedTuple

from memray.errors import StoreError
from memray.files import fsync_dir
from memray.ids import ConversationKey

__all__ = ["AckLedger", "Acked"]


class Acked(NamedTuple):
    key: ConversationKey
    id: str
    seq: int


class AckLedger:
    """One host's ledger file. ``AckLedger(path)`` stores the path; :meth:`open` opens it."""

    def __init__(self, path: str, compact_bytes: int = 8 << 20) -> None:
        self.path = path
        self.compact_bytes = compact_bytes
        self._fd: int | None = None
        self.size = 0

    def open(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.size = os.fstat(self._fd).st_size

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def due(self) -> bool:
        """Whether the file has grown past ``compact_bytes`` (time to :meth:`rewrite`)."""
        return self.size > self.compact_bytes

    def append(self, records: Iterable[tuple[ConversationKey, list[tuple[str, int]]]]) -> None:
        """Record acknowledged ``(id, seq)`` pairs per conversation, in one ``write``. When it
        returns the record survives the death of this process. Raises StoreError if it cannot."""
        data = _encode(records)
        if not data or self._fd is None:
            return
        try:
            written = os.write(self._fd, data)
            while written < len(data):  # a short write (rare): finish it
                written += os.write(self._fd, data[written:])
        except OSError as exc:
            raise StoreError(
                f"cannot record acknowledged messages in {self.path!r} ({exc}); nothing was acknowledged: "
                "free disk space and retry"
            ) from exc
        self.size += len(data)

    def read(self) -> list[Acked]:
        """Every record in the file, in order (a torn last line, cut by a kill, is skipped)."""
        try:
            with open(self.path, "rb") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        out: list[Acked] = []
        for line in lines:
            try:
                records = json.loads(line)
            except ValueError:
                continue
            for record in records if isinstance(records, list) else ():
                try:
                    app, user_id, conversation_id, pairs = record
                    key = ConversationKey(str(app), str(user_id), str(conversation_id))
                    out.extend(Acked(key, str(i), int(s)) for i, s in pairs)
                except (ValueError, TypeError):
                    continue
        return out

    def rewrite(self, records: Iterable[tuple[ConversationKey, list[tuple[str, int]]]]) -> None:
        """Replace the file by ``records`` alone (atomically: a crash leaves the old file or the
        new one). Durability: as :meth:`append` (survives the process, not a power cut)."""
        data = _encode(records)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, self.path)
        fsync_dir(os.path.dirname(self.path))
        self.close()
        self.open()

    def reset(self) -> None:
        """Empty the ledger (everything in it has been resolved against the store)."""
        self.rewrite([])


def _encode(records: Iterable[tuple[ConversationKey, list[tuple[str, int]]]]) -> bytes:
    """One line per call: a JSON array of ``[app, user_id, conversation_id, [[id, seq], ...]]``
    (one ``json.dumps`` for the whole call; ASCII, so any str is written, even an unpaired
    surrogate that validation would have refused)."""
    rows = [[k.app, k.user_id, k.conversation_id, pairs] for k, pairs in records if pairs]
    return (json.dumps(rows, separators=(",", ":")) + "\n").encode("ascii") if rows else b""
