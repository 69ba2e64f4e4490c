"""Configuration: one pydantic model, every field documented, every default sound on 2 cores.

A bad configuration (an unknown option, a typo in ``mode``, ``hosts=0``) raises
:class:`memray.ValidationError` naming the option, the value and the fix (``did you mean
'inprocess'?``), from the constructors, ``model_validate`` and :func:`memray.open` alike.
"""

from __future__ import annotations

import difflib
import os
import re
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic import ValidationError as PydanticValidationError

from memray.errors import ValidationError
from memray.models import RetrievalMode

__all__ = ["EmbedderConfig", "SummarizerConfig", "IndexConfig", "MemoryConfig", "RunMode"]

#: How the cores run: as Ray actors, or as plain objects in this process.
RunMode = Literal["ray", "inprocess"]

#: ``MemoryConfig.placement_timeout_s``'s default, also the bound of the Ray calls made where no
#: MemoryConfig is at hand (a shard's calls to the store, the jobs' store clients).
PLACEMENT_TIMEOUT_S = 30.0
#: The most hosts a memray starts when not told how many.
MAX_DEFAULT_HOSTS = 4


def default_hosts(address: str | None, num_cpus: int | None) -> int:
    """How many hosts a memray runs when not told: one per CPU of the local Ray (``num_cpus``, else
    this machine's), at most :data:`MAX_DEFAULT_HOSTS`; a cluster's (``address``) count of CPUs is
    not known here, so there it is that most. A host process beyond the cores competes with the
    shards, the store and the caller for them: on 2 cores a 10,000-agent tick took 7% less CPU in
    all with 2 hosts than with 4 (the hosts' part 11.0 -> 10.2 s and the store's 5.7 -> 4.3 s over
    five ticks), and ray-mode ``open`` starts two processes fewer."""
    if address is not None:
        return MAX_DEFAULT_HOSTS
    return max(1, min(MAX_DEFAULT_HOSTS, num_cpus or os.cpu_count() or 1))


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    if not TYPE_CHECKING:  # hidden from mypy, so that the pydantic plugin still types the fields

        def __init__(self, **data: Any) -> None:
            try:
                super().__init__(**data)
            except PydanticValidationError as exc:
                # not chained: the message already says all pydantic said, in memray's terms
                raise config_error(type(self), exc) from None

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, **kwargs)
        except PydanticValidationError as exc:
            raise config_error(cls, exc) from None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        try:
            return super().model_validate_json(json_data, **kwargs)
        except PydanticValidationError as exc:
            raise config_error(cls, exc) from None


def config_error(cls: type[BaseModel], exc: PydanticValidationError) -> ValidationError:
    """pydantic's first complaint about a configuration as a :class:`ValidationError` that names
    the option (dotted for nested ones: ``embedder.kind``), the value and what to do."""
    # (a default computed from other options is not computed when one of them is invalid: not
    # a mistake of its own)
    errors = [e for e in exc.errors() if e.get("type") != "default_factory_not_called"]
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ())]
    inner = first.get("ctx", {}).get("error")
    if isinstance(inner, ValidationError):  # a nested config's own translated error (its __init__)
        return ValidationError(".".join([*loc, inner.field]), inner.value, inner.problem, inner.hint)
    field = ".".join(loc) or cls.__name__
    owner = _model_at(cls, loc[:-1])
    kind, value = first.get("type", ""), first.get("input")
    if kind == "extra_forbidden":
        options = list(owner.model_fields)
        problem = f"unknown {owner.__name__} option"
        hint = _did_you_mean(loc[-1], options) + f"options: {', '.join(options)}"
    elif kind == "literal_error":
        expected = str(first.get("ctx", {}).get("expected", ""))
        problem = f"must be {expected}"
        hint = _did_you_mean(str(value), re.findall(r"'([^']*)'", expected)).rstrip("; ")
    else:
        problem = re.sub(r"^Input should be", "must be", str(first.get("msg", exc)))
        hint = f"see memray.{owner.__name__} for what each option takes"
    if len(errors) > 1:
        hint += f" (also invalid: {', '.join(_where(e) for e in errors[1:])})"
    return ValidationError(field, value, problem, hint.strip())


def _where(error: Any) -> str:
    loc = [str(p) for p in error.get("loc", ())]
    inner = error.get("ctx", {}).get("error")
    return ".".join([*loc, inner.field] if isinstance(inner, ValidationError) else loc) or "?"


def _model_at(cls: type[BaseModel], path: list[str]) -> type[BaseModel]:
    """The (nested) config class that holds the option at ``path``."""
    for name in path:
        info = cls.model_fields.get(name)
        annotation = info.annotation if info is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            break
        cls = annotation
    return cls


def _did_you_mean(given: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(given, choices, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


class EmbedderConfig(_Config):
    """Which embedder turns text into vectors: ``"static"`` (the default: meaning, offline, tens
    of thousands of texts a second; :mod:`memray.embedding.static`), ``"minilm"`` (the transformer
    it is distilled from, run in numpy: more accurate, ~100x slower), ``"hash"`` (words only, no
    model), ``"openai"`` (any OpenAI-compatible endpoint), ``"local"`` (sentence-transformers,
    needs torch). ``kind="none"`` disables semantic recall; ``kind="custom"`` uses ``custom``, an
    object of the Embedder protocol or a plain function (``memray.open(path, embedder=...)`` sets
    both; :mod:`memray.embedding.custom`). ``memray.open(path, embedder="minilm")`` names a kind."""

    kind: Literal["static", "minilm", "hash", "openai", "local", "none", "custom"] = "static"
    # static: the model (default minilm-static-v1, or a folder); openai/local: the model name;
    # custom: its model id; hash, minilm: ignored
    model: str | None = None
    custom: Any = None  # kind="custom": the caller's embedder (pickled to the actors in Ray mode)
    dim: int = Field(256, gt=0, le=8192)  # hash dimension, or `dimensions` asked of the API
    base_url: str | None = None  # OpenAI-compatible endpoint (vLLM, Ollama...); None: OPENAI_BASE_URL
    api_key_env: str = "OPENAI_API_KEY"
    send_dimensions: bool = False  # pass `dimensions` to the API (not every server accepts it)
    batch_size: int = Field(256, gt=0, le=2048)
    timeout_s: float = Field(30.0, gt=0)
    max_retries: int = Field(2, ge=0)
    cache_size: int = Field(100_000, ge=0)  # LRU entries per process; 0 disables it (and the static memo)
    cache_ttl_s: float = Field(3600.0, gt=0)
    device: str | None = None  # local model: "cuda", "cpu" or None (auto)
    # cosine above which a vector hit counts as relevant; None: calibrated per model and recorded
    # in <path>/calibration.json (memray.embedding.calibration)
    min_similarity: float | None = Field(None, ge=-1.0, lt=1.0)

    @model_validator(mode="after")
    def _custom(self) -> EmbedderConfig:
        if (self.kind == "custom") != (self.custom is not None):
            raise ValidationError(
                "embedder.custom",
                self.custom,
                "is set exactly when kind='custom'",
                "pass memray.open(path, embedder=your_embedder)",
            )
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
    # (memray.index.scorer); 0.2 took LoCoMo recall@10 from 0.64 to 0.67 (hash embedder)
    neighbour_weight: float = Field(0.2, ge=0.0, le=1.0)
    # namespaces with fewer vectors are searched exactly (numpy), larger ones through HNSW;
    # 5000 = measured p50 crossover at dim 256, ef 128 (python -m benchmarks.index_crossover)
    exact_threshold: int = Field(5_000, ge=0)
    # an app's items on one shard are searched app-wide through one flat index (memray.index.flat):
    # exact below this many vectors (a scan of 100k x 256 floats: ~10 ms here), HNSW from here
    app_exact_threshold: int = Field(100_000, ge=0)
    hnsw_m: int = Field(16, gt=1)
    hnsw_ef_construction: int = Field(200, gt=0)
    hnsw_ef: int = Field(128, gt=0)  # 64 gave recall@10 < 0.9 on hard clustered data; see benchmark
    compact_ratio: float = Field(0.25, gt=0, lt=1)  # rebuild an index once this share is tombstones
    snapshot_every_s: float = Field(30.0, gt=0)


class MemoryConfig(_Config):
    """Everything :func:`memray.open` needs. Defaults: embedded, local, no API key."""

    path: str = "./memray-data"
    mode: RunMode = "ray"
    address: str | None = None  # Ray cluster to join; None starts a local Ray on demand
    namespace: str = "memray"  # Ray namespace the named actors live in
    num_cpus: int | None = None  # CPUs for a local Ray started on demand
    # ConversationHost actors; default: one per CPU up to 4 (default_hosts)
    hosts: int = Field(default_factory=lambda data: default_hosts(data.get("address"), data.get("num_cpus")), gt=0)
    shards: int = Field(2, gt=0)  # VectorShard actors
    # HistoryStore partitions, one DuckDB file and one writer each; a user lives on partition
    # user_hash % stores (memray.store.layout); a data directory keeps the count it was written with
    stores: int = Field(1, gt=0, le=1024)
    debounce_ms: int = Field(200, ge=0)  # persist debounce; each add resets it, up to 2x it after the first
    buffer_window: int = Field(32, ge=0)  # recent messages a conversation keeps in memory
    max_message_chars: int = Field(1_000_000, gt=0)
    retry_backoff_s: float = Field(0.05, gt=0)  # first retry delay of a failed write; doubles
    retry_backoff_max_s: float = Field(5.0, gt=0)
    # a durable add, flush() or close() that cannot make its messages durable within this bound
    # (the store down, not a bad row: those are dead-lettered at once) raises StoreError instead
    # of waiting on; the messages stay pending and are retried in the background
    write_timeout_s: float = Field(60.0, gt=0)
    # Ray mode: a call to a host, shard or store actor that Ray has had on no node this long (it
    # lost its node and no node left offers what it asks for, e.g. store_resource) raises
    # UnavailableError naming the actor and what to do, instead of waiting for ever; a call to an
    # actor that is placed (alive, or still starting) is never cut, however long it runs
    placement_timeout_s: float = Field(PLACEMENT_TIMEOUT_S, gt=0)
    # backpressure: acknowledged-but-not-durable messages one host holds at most; an add past it
    # waits for room (at most write_timeout_s) or, with block=False, raises Backpressure; 0: no bound
    max_unpersisted: int = Field(10_000, ge=0)
    # show Ray's own log lines (info and warnings) and the actors' output; off: Ray logs errors only
    verbose: bool = False
    # the cyclic garbage collector's first-generation threshold in the process that opens memray
    # (CPython's: 700; memray's actor processes always run with this default; None: leave the
    # process's own): see memray.runtime.collector for what it costs and saves
    gc_threshold: int | None = Field(10_000, gt=0)
    # Ray custom resource each HistoryStore partition requests (1 unit): pins the partitions, and
    # so their DuckDB files, to the nodes with disks that offer it; a node offering K units holds
    # up to K partitions (cluster.yaml: 1 per node, stores=3 on 3 nodes)
    store_resource: str | None = None
    embedder: EmbedderConfig = EmbedderConfig()
    summarizer: SummarizerConfig = SummarizerConfig()
    index: IndexConfig = IndexConfig()

    @property
    def root(self) -> str:
        return os.path.abspath(self.path)

    @property
    def store_path(self) -> str:
        """The history file with ``stores=1``; with more, :func:`memray.store.layout.store_files`."""
        return os.path.join(self.root, "history.duckdb")

    @property
    def vectors_path(self) -> str:
        return os.path.join(self.root, "vectors")

    @property
    def exports_path(self) -> str:
        return os.path.join(self.root, "exports")
