"""The active embedding model of a data directory, recorded durably in ``<root>/model.json``.

A data directory's vectors and indexes belong to one model at a time. Until a model is recorded
the configured one (``MemoryConfig.embedder``) is used; once the backfill job has cut over to a
new model it records it here, and from then on :func:`memray.open`, the conversation hosts and
the shards use the recorded model instead of the configured one (a warning says so when they
differ). Change models by running ``memray backfill embeddings``, not by editing the config.

The default embedder is recorded when a directory is first opened with it
(:func:`record_default`), so a later release that changes the default never changes the model of an
existing directory. A directory made before models were recorded this way holds data and no
``model.json``: the default then was the hash embedder, so it keeps it, and the log says how to
re-embed it to today's default (``memray backfill embeddings DIR --model static``).

The file holds JSON only: ``{"model_id", "dim", "embedder": <EmbedderConfig>, "updated_at"}``.
"""

from __future__ import annotations

import json
import logging
import os
import time

from pydantic import BaseModel, ConfigDict

from memray.config import EmbedderConfig, MemoryConfig
from memray.embedding.factory import build_embedder
from memray.files import atomic_write

__all__ = [
    "ActiveModel",
    "MODEL_FILE",
    "LEGACY_DEFAULT",
    "read_active_model",
    "write_active_model",
    "record_default",
    "holds_data",
    "resolve_config",
    "ModelWatcher",
]

log = logging.getLogger(__name__)

MODEL_FILE = "model.json"
#: The default embedder of the releases that did not record it: the directories they made use it.
LEGACY_DEFAULT = EmbedderConfig(kind="hash")


class ActiveModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model_id: str
    dim: int
    embedder: EmbedderConfig
    updated_at: float


def model_file(root: str) -> str:
    return os.path.join(os.path.abspath(root), MODEL_FILE)


def read_active_model(root: str) -> ActiveModel | None:
    """The recorded model of the data directory ``root``, or None when none is recorded."""
    try:
        with open(model_file(root), encoding="utf-8") as f:
            return ActiveModel.model_validate(json.load(f))
    except FileNotFoundError:
        return None


def write_active_model(root: str, embedder: EmbedderConfig, model_id: str, dim: int) -> ActiveModel:
    """Record ``embedder`` as the active model of ``root``.

    Durability: written to a temporary file, fsynced, renamed over ``model.json`` and the
    directory fsynced: when it returns the record survives a crash, and a crash before leaves the
    previous record whole."""
    record = ActiveModel(model_id=model_id, dim=dim, embedder=embedder, updated_at=time.time())
    path = model_file(root)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, lambda fh: fh.write(record.model_dump_json().encode("utf-8")))
    return record


def holds_data(root: str) -> bool:
    """Whether ``root`` already holds a store or vectors."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return False
    return "vectors" in names or any(n.startswith("history") and n.endswith(".duckdb") for n in names)


def record_default(config: MemoryConfig, existing: bool) -> ActiveModel | None:
    """Record the model of a directory opened with the default embedder and none recorded: the
    default itself for a new directory, :data:`LEGACY_DEFAULT` for one that already held data
    (``existing``, :func:`holds_data` before memray started on it; module docstring). The record
    written, or None when nothing was to be recorded."""
    if config.embedder != EmbedderConfig() or read_active_model(config.root) is not None:
        return None

    embedder = LEGACY_DEFAULT if existing else config.embedder
    built = build_embedder(embedder)
    assert built is not None  # neither default is kind="none"
    if embedder == LEGACY_DEFAULT:
        log.warning(
            "%s was made with the hash embedder (%s), memray's default until the static embedder: it "
            "keeps using it. Its searches find words, not meaning; re-embed it to today's default with "
            "`memray backfill embeddings %s --model static`",
            config.root,
            built.model_id,
            config.root,
        )
    return write_active_model(config.root, embedder, built.model_id, built.dim)


def resolve_config(config: MemoryConfig) -> MemoryConfig:
    """``config`` with its embedder replaced by the recorded one of its data directory, if any."""
    record = read_active_model(config.root)
    if record is None or record.embedder == config.embedder:
        return config
    if config.embedder != EmbedderConfig():
        log.warning(
            "%s records model %r; using it instead of the configured embedder (re-embed with "
            "`memray backfill embeddings` to change models)",
            config.root,
            record.model_id,
        )
    return config.model_copy(update={"embedder": record.embedder})


class ModelWatcher:
    """Tells a long-lived reader (the facade) when the recorded model changed: one ``stat``."""

    def __init__(self, root: str) -> None:
        self.path = model_file(root)
        self._stamp = self._stat()

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_ino

    def changed(self) -> ActiveModel | None:
        """The new record if the file changed since the last call, else None."""
        stamp = self._stat()
        if stamp == self._stamp:
            return None
        self._stamp = stamp
        return read_active_model(os.path.dirname(self.path))
