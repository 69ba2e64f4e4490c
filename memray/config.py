"""Configuration: one pydantic model, every field documented, every default sound on 2 cores."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memray.models import RetrievalMode

__all__ = ["EmbedderConfig", "SummarizerConfig", "IndexConfig", "MemoryConfig"]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbedderConfig(_Config):
    """Which embedder turns text into vectors. ``kind="none"`` disables semantic recall;
    ``kind="custom"`` uses ``custom``, an object of the Embedder protocol or a plain function
    (``memray.open(path, embedder=...)`` sets both; :mod:`memray.embedding.custom`)."""

    kind: Literal["hash", "openai", "local", "none", "custom"] = "hash"
    model: str | None = None  # openai/local model name; custom: its model id; hash: ignored
    custom: Any = None  # kind="custom": the caller's embedder (pickled to the actors in Ray mode)
    dim: int = Field(256, gt=0, le=8192)  # hash dimension, or `dimensions` asked of the API
    base_url: str | None = None  # OpenAI-compatible endpoint (vLLM, Ollama...); None: OPENAI_BASE_URL
    api_key_env: str = "OPENAI_API_KEY"
    send_dimensions: bool = False  # pass `dimensions` to the API (not every server accepts it)
    batch_size: int = Field(256, gt=0, le=2048)
    timeout_s: float = Field(30.0, gt=0)
    max_retries: int = Field(2, ge=0)
    cache_size: int = Field(100_000, ge=0)  # LRU entries per process; 0 disables the cache
    cache_ttl_s: float = Field(3600.0, gt=0)
    device: str | None = None  # local model: "cuda", "cpu" or None (auto)
    # cosine above which a vector hit counts as relevant; None: calibrated per model and recorded
    # in <path>/calibration.json (memray.embedding.calibration)
    min_similarity: float | None = Field(None, ge=-1.0, lt=1.0)

    @model_validator(mode="after")
    def _custom(self) -> EmbedderConfig:
        if (self.kind == "custom") != (self.custom is not None):
            from memray.errors import ValidationError

            raise ValidationError("embedder.custom", self.custom, "is set exactly when kind='custom'",
                                  "pass memray.open(path, embedder=your_embedder)")
        return self


class SummarizerConfig(_Config):
    kind: Literal["extractive", "openai", "none"] = "extractive"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    trigger_tokens: int = Field(170_000, gt=0)
    keep_messages: int = Field(6, ge=0)
    max_summary_tokens: int = Field(2_000, gt=0)
    timeout_s: float = Field(60.0, gt=0)
    # title new conversations with the summariser (kind="openai"; memray.conversation.title);
    # otherwise a conversation's title is its first user message
    titles: bool = False


class IndexConfig(_Config):
    # default retrieval mode; on `python -m benchmarks.retrieval_eval` hybrid's recall@10 is at
    # least each part's on LoCoMo and the synthetic set, with the hash embedder and with MiniLM
    mode: RetrievalMode = "hybrid"
    # share of the vector score in a hybrid score; None: the embedder's calibrated weight
    # (memray.embedding.calibration: 0.03 for the hash embedder, 0.42 for MiniLM)
    vector_weight: float | None = Field(None, ge=0.0, le=1.0)
    # how much a relevant neighbouring message (seq +- 1) raises a relevant message's score
    # (memray.index.fusion); 0.2 took LoCoMo recall@10 from 0.64 to 0.67 (hash embedder)
    neighbour_weight: float = Field(0.2, ge=0.0, le=1.0)
    # namespaces with fewer vectors are searched exactly (numpy), larger ones through HNSW;
    # 5000 = measured p50 crossover at dim 256, ef 128 (python -m benchmarks.index_crossover)
    exact_threshold: int = Field(5_000, ge=0)
    hnsw_m: int = Field(16, gt=1)
    hnsw_ef_construction: int = Field(200, gt=0)
    hnsw_ef: int = Field(128, gt=0)  # 64 gave recall@10 < 0.9 on hard clustered data; see benchmark
    compact_ratio: float = Field(0.25, gt=0, lt=1)  # rebuild an index once this share is tombstones
    snapshot_every_s: float = Field(30.0, gt=0)


class MemoryConfig(_Config):
    """Everything :func:`memray.open` needs. Defaults: embedded, local, no API key."""

    path: str = "./memray-data"
    mode: Literal["ray", "inprocess"] = "ray"
    address: str | None = None  # Ray cluster to join; None starts a local Ray on demand
    namespace: str = "memray"  # Ray namespace the named actors live in
    num_cpus: int | None = None  # CPUs for a local Ray started on demand
    hosts: int = Field(4, gt=0)  # ConversationHost actors
    shards: int = Field(2, gt=0)  # VectorShard actors
    debounce_ms: int = Field(200, ge=0)  # persist debounce; each add resets it
    buffer_window: int = Field(32, ge=0)  # recent messages a conversation keeps in memory
    max_message_chars: int = Field(1_000_000, gt=0)
    retry_backoff_s: float = Field(0.05, gt=0)  # first retry delay of a failed write; doubles
    retry_backoff_max_s: float = Field(5.0, gt=0)
    # Ray custom resource the HistoryStore actor requests (0.01 of it): pins the store, and so
    # its DuckDB file, to the node that offers it (cluster.yaml gives the head {"memray_store": 1})
    store_resource: str | None = None
    embedder: EmbedderConfig = EmbedderConfig()
    summarizer: SummarizerConfig = SummarizerConfig()
    index: IndexConfig = IndexConfig()

    @property
    def root(self) -> str:
        return os.path.abspath(self.path)

    @property
    def store_path(self) -> str:
        return os.path.join(self.root, "history.duckdb")

    @property
    def vectors_path(self) -> str:
        return os.path.join(self.root, "vectors")

    @property
    def exports_path(self) -> str:
        return os.path.join(self.root, "exports")
