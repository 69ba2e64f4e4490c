"""Validation of ids and collision-free keys built from them.

Every id (app, user, conversation, message, session, project, entry) is non-empty, at most
:data:`MAX_ID_CHARS` Unicode characters (characters, not bytes: ``"日本"`` is 2), and holds no
control characters (Unicode category ``Cc``) nor lone surrogates (``Cs``: a Python str such as
``"a\ud800"`` that no UTF-8 encoder accepts, so no store could hold it). Keys built from ids are
tuples or length-prefixed strings, never concatenations that two different id tuples could both
produce.

The keys every part stands on live here too: :class:`ConversationKey`, :class:`UserKey`, and a
shard's :class:`Namespace` with :func:`user_hash` (the shard of a user), which the store and the
index both use.
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from memray.errors import InvalidIdError

__all__ = [
    "MAX_ID_CHARS",
    "validate_id",
    "validate_optional_id",
    "validate_project_id",
    "encode_key",
    "stable_hash",
    "ConversationKey",
    "UserKey",
    "Namespace",
    "as_namespace",
    "pack_namespaces",
    "unpack_namespaces",
    "conversation_namespace",
    "entry_namespace",
    "user_hash",
]

MAX_ID_CHARS = 256


def validate_id(field: str, value: object) -> str:
    """Return ``value`` if it is a valid id, else raise :class:`InvalidIdError` naming ``field``."""
    if not isinstance(value, str):
        raise InvalidIdError(field, value, f"must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidIdError(field, value, "must not be empty", "pass a non-empty id")
    if len(value) > MAX_ID_CHARS:
        raise InvalidIdError(
            field,
            value,
            f"is {len(value)} characters, the limit is {MAX_ID_CHARS}",
            "use a shorter id (a hash of a long one works)",
        )
    if value.isascii() and value.isprintable():
        return value
    for ch in value:
        category = unicodedata.category(ch)
        if category == "Cc":
            raise InvalidIdError(field, value, f"contains the control character {ch!r}", "remove control characters")
        if category == "Cs":
            raise InvalidIdError(
                field,
                value,
                f"contains the lone surrogate {ch!r}, which UTF-8 cannot encode",
                "decode the id properly, or replace what cannot be encoded: s.encode('utf-8', 'replace').decode()",
            )
    return value


def validate_optional_id(field: str, value: object) -> str | None:
    """``value`` if it is None (the id is not given) or a valid id; else InvalidIdError naming ``field``."""
    return None if value is None else validate_id(field, value)


def validate_project_id(project_id: object) -> str:
    """Validate a project id: non-empty, at most 256 characters, no control characters or lone
    surrogates."""
    return validate_id("project_id", project_id)


def encode_key(*parts: str) -> str:
    """Encode parts as one string no other tuple of parts encodes to (length-prefixed)."""
    return "".join(f"{len(p)}:{p}" for p in parts)


@functools.lru_cache(maxsize=1 << 17)
def stable_hash(*parts: str) -> int:
    """A 64-bit hash of ``parts`` that is the same in every process (unlike ``hash()``).

    Memoised: a tick routes every message and search by it (a user's shard, a conversation's
    host), ~5 times per message; blake2b over the encoded key costs ~1.2 us, a hit ~0.15 us.
    131,072 keys (tens of MB at most) cover a 100,000-agent simulation's conversations."""
    digest = hashlib.blake2b(encode_key(*parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True, slots=True, order=True)
class UserKey:
    """The isolation boundary: nothing crosses it unless asked for app-wide."""

    app: str
    user_id: str

    @classmethod
    def of(cls, app: str, user_id: str) -> UserKey:
        return cls(validate_id("app", app), validate_id("user_id", user_id))


@dataclass(frozen=True, slots=True, order=True)
class ConversationKey:
    """``(app, user_id, conversation_id)``: the identity of one conversation."""

    app: str
    user_id: str
    conversation_id: str

    @classmethod
    def of(cls, app: str, user_id: str, conversation_id: str) -> ConversationKey:
        return cls(
            validate_id("app", app), validate_id("user_id", user_id), validate_id("conversation_id", conversation_id)
        )

    @property
    def user(self) -> UserKey:
        return UserKey(self.app, self.user_id)

    def __reduce__(self) -> tuple[type[ConversationKey], tuple[str, str, str]]:
        # rebuilt from its three strings: the dataclass default (``_dataclass_setstate``) calls
        # ``dataclasses.fields`` per key, 5% of a host's time in an add_many (write_path_micro)
        return (ConversationKey, (self.app, self.user_id, self.conversation_id))

    def route(self, n: int) -> int:
        """The index of the host (of ``n``) that owns this conversation."""
        return stable_hash(self.app, self.user_id, self.conversation_id) % n


class Namespace(NamedTuple):
    """A vector/lexical namespace. ``kind`` is ``"conv"`` (scope = conversation id) or
    ``"entry"`` (scope = project id, ``""`` for the user's global entries)."""

    app: str
    user_id: str
    kind: str
    scope: str


def as_namespace(value: tuple[str, ...]) -> Namespace:
    """``value`` as a :class:`Namespace`: itself when it is one (what replies and batches carry:
    pickling keeps the class), else built from its four parts."""
    return value if type(value) is Namespace else Namespace(*value)


def pack_namespaces(column: Iterable[tuple[str, ...]]) -> tuple[list[tuple[str, ...]], list[int]]:
    """A column of namespaces as it crosses between processes: each distinct one once, as a plain
    tuple (a ``Namespace`` goes through the pickler's per-object hook), and where each item's is.
    A conversation's namespace leads all its messages' rows and refs."""
    index: dict[tuple[str, ...], int] = {}
    at = [index.setdefault(ns, len(index)) for ns in column]
    return [tuple(ns) for ns in index], at


def unpack_namespaces(unique: list[tuple[str, ...]], at: list[int]) -> Iterator[Namespace]:
    """The column :func:`pack_namespaces` packed, as ``Namespace`` (each distinct one made once)."""
    return map([Namespace._make(ns) for ns in unique].__getitem__, at)


def conversation_namespace(key: ConversationKey) -> Namespace:
    return Namespace(key.app, key.user_id, "conv", key.conversation_id)


def entry_namespace(app: str, user_id: str, project_id: str | None) -> Namespace:
    return Namespace(app, user_id, "entry", project_id or "")


def user_hash(app: str, user_id: str) -> int:
    """Signed 64-bit stable hash of ``(app, user_id)``: the shard of a user is ``h % shards``."""
    h = stable_hash(app, user_id)
    return h - (1 << 64) if h >= (1 << 63) else h
