"""The facade's root: :func:`open` and :class:`Memory` (the handles are in their own modules).

Thin by design: it validates input and routes each call to the right core (a host, a shard, the
store) through the :class:`~memray.facade.session.Session` it started. Every call runs through
its :class:`~memray.facade.runner.Runner` (as every handle's does), written once as the
``a``-prefixed coroutine with its sync twin derived by :func:`~memray.facade.runner.blocking`.
Both modes (``ray``, ``inprocess``) run the same cores behind it.

Arguments are checked by :mod:`memray.arguments` (the rules the long-term service uses too)
before anything is sent. Every call on a closed memray raises the same
:class:`~memray.errors.ClosedError` (:attr:`Runner.session <memray.facade.runner.Runner.session>`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Literal, TypeVar, get_args, overload

from memray.arguments import (
    CONVERSATIONS_LIMIT,
    SEARCH_LIMIT,
    check_count,
    check_limit,
    check_min_score,
    check_mode,
    check_order,
    check_query,
)
from memray.config import EmbedderConfig, MemoryConfig, RunMode
from memray.conversation.recall import SearchResults
from memray.conversation.working_memory_spec import WorkingMemorySpec
from memray.embedding.custom import check_custom
from memray.errors import MemrayError, StoreError, ValidationError
from memray.facade.conversation import (
    ContextCall,
    ConversationHandle,
    SearchCall,
    coerce_messages,
    context_read,
    reads_of,
    search_read,
)
from memray.facade.exit import hold, release
from memray.facade.keys import KeysHandle
from memray.facade.runner import Internals, Runner, blocking
from memray.facade.service import MemoryServiceHandle
from memray.facade.session import ConversationList, check_path, raise_unpersisted
from memray.ids import ConversationKey, validate_id, validate_optional_id
from memray.models import (
    Context,
    ConversationOrder,
    DeletionProof,
    DeletionReceipt,
    Message,
    MessageInput,
    RetrievalMode,
)
from memray.ranking import Scoring, stream_of
from memray.rpc.batch import Answer
from memray.runtime import collector
from memray.runtime.fork import check_fork_path
from memray.runtime.join import running_memray
from memray.sim_time import SimTime, window
from memray.store.deadletter import DeadLetter

__all__ = ["open", "Memory"]

T = TypeVar("T")

#: What closing at exit may take beyond ``write_timeout_s`` (the flush's bound): the embedding
#: pipeline's drain, the shards' snapshots, the store's checkpoint.
EXIT_MARGIN_S = 10.0


def open(
    path: str | None = None, mode: RunMode | None = None, config: MemoryConfig | None = None, **overrides: Any
) -> Memory:  # noqa: A001
    """Open (creating if needed) the memory at ``path``; ``mode="ray"`` (default) or ``"inprocess"``.
    ``embedder=`` takes a kind (``"static"``, the default; ``"minilm"``, ``"hash"``, ``"openai"``,
    ...), an :class:`~memray.config.EmbedderConfig`, or your own embedder: any
    object with ``model_id``, ``dim`` and ``embed(texts)``, or a plain function
    ``list[str] -> array`` (:mod:`memray.embedding.custom`)."""
    return Memory(_configured(config or MemoryConfig(), path, mode, overrides))._start()


def _configured(base: MemoryConfig, path: str | None, mode: RunMode | None, overrides: dict[str, Any]) -> MemoryConfig:
    """``base`` with ``path``, ``mode`` and ``overrides`` (options of :func:`open`) applied,
    validated as a whole."""
    updates = dict(overrides)
    if isinstance(updates.get("embedder"), str):  # a kind: "static", "minilm", "hash", "openai", ...
        updates["embedder"] = {"kind": embedder_kind(updates["embedder"])}
    if "embedder" in updates and not isinstance(updates["embedder"], (EmbedderConfig, dict)):
        updates["embedder"] = EmbedderConfig(kind="custom", custom=check_custom(updates["embedder"]))
    if path is not None:
        updates["path"] = path
    if mode is not None:
        updates["mode"] = mode
    return MemoryConfig.model_validate({**base.model_dump(), **updates})


def embedder_kind(kind: str) -> str:
    """``kind`` if it names an embedder that needs no object (not ``"custom"``), else a ValidationError."""
    kinds = [k for k in get_args(EmbedderConfig.model_fields["kind"].annotation) if k != "custom"]
    if kind not in kinds:
        raise ValidationError(
            "embedder", kind, "is not an embedder kind", f"use one of {kinds}, an EmbedderConfig or your own embedder"
        )
    return kind


class Memory:
    """One memray: conversations, the long-term service, erasure. Close it (or use ``with``).
    Made by :func:`memray.open`."""

    def __init__(self, config: MemoryConfig) -> None:
        self._runner = Runner()
        self._config = config
        self._started_ray = False  # this driver started a local Ray (so it owns the actors by default)
        self._connected_ray = False  # this driver called ray.init (so it disconnects on close)
        self._owns_actors = False  # a fork made by this driver: close() stops its actors
        self._gc_threshold: int | None = None  # what this memray raised the collector's threshold to
        #: What the fork that opened this memray measured (None unless made by :meth:`fork`).
        self.fork_info: dict[str, Any] | None = None

    @property
    def config(self) -> MemoryConfig:
        """The configuration in force (the active model a re-embedding job recorded included)."""
        return self._config if self._runner.closed else self._runner.session.config

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run (every call then raises :class:`~memray.errors.ClosedError`)."""
        return self._runner.closed

    @property
    def internals(self) -> Internals:
        """The running parts under this memray (the store, the shards, the hosts, recall, the
        long-term service's core) and the means to run their calls on memray's loop: for jobs,
        extensions, benchmarks and tests. Not a stable API (docs/internals.md)."""
        self._runner.check_open()
        return self._runner

    # -- lifecycle ------------------------------------------------------------------------
    def _start(self) -> Memory:
        check_path(self.config)
        try:
            return self._start_once()
        except StoreError:
            # two processes that opened a free data directory at once each started a Ray: the one
            # whose store found the file locked stopped its Ray, and now joins the other's
            if not (self._started_ray and _held_by_ray(self.config)):
                raise
            return self._start_once()

    def _start_once(self) -> Memory:
        if self.config.mode == "ray":  # here, not on the loop's thread: Ray wants the main thread
            # imports ray (150 ms), needed only in mode='ray': memray imports without it (tests/test_layers.py)
            from memray.runtime.actors import ensure_ray

            # joins the memray running on this path if there is one (its Ray, namespace and shape)
            self._config, self._connected_ray = ensure_ray(self.config)
            self._started_ray = self._connected_ray and not self.config.address
        self._gc_threshold = self.config.gc_threshold
        collector.hold(self._gc_threshold)
        try:
            self._runner.open(self.config)
        except BaseException:
            collector.release(self._gc_threshold)
            if self._connected_ray:  # a local Ray started for nothing stops; a joined one is left
                from memray.runtime.actors import shutdown_ray  # (ray: only when it was started)

                shutdown_ray()
            raise
        hold(self)  # closed at exit if the caller does not close it
        return self

    def close(self, terminate: bool | None = None) -> None:
        """Flush everything acknowledged, then stop. Returns within ``write_timeout_s`` plus about
        a minute whatever state the actors are in; if something acknowledged could not be made
        durable (the store unreachable) or was dead-lettered since the last flush, it raises
        StoreError saying how many, after everything is stopped.

        In Ray mode the actors are killed if ``terminate`` (default: only when ``open`` started
        a local Ray itself; a driver that joined a running Ray leaves them to the others sharing
        them, and only disconnects).

        A memray still open when the interpreter exits is closed then (:mod:`memray.facade.exit`).
        """
        self._close(terminate)

    def _close(self, terminate: bool | None, timeout_s: float | None = None) -> None:
        if self._runner.closed:
            return
        session = self._runner.session
        release(self)
        collector.release(self._gc_threshold)
        if self.config.mode == "ray" and not _ray_is_up():
            self._runner.abandon()
            raise StoreError(
                "Ray was shut down before this memray was closed, and its actors with it: what they had not yet "
                "made durable is recorded as lost (Memory.dead_letters()) when the data directory is opened again; "
                "close memray before ray.shutdown()"
            )
        reports: list[dict[str, Any]] = []
        try:
            default = self._started_ray or self._owns_actors
            reports = self._runner.stop(default if terminate is None else terminate, timeout_s)
        finally:
            self._config = session.config
            if self._connected_ray:
                from memray.runtime.actors import shutdown_ray  # (ray: only when it was started)

                shutdown_ray()  # stops a local Ray this driver started; only disconnects from a joined one
        raise_unpersisted(reports)

    def _close_at_exit(self) -> str | None:
        """:meth:`close`, its flush bounded by ``write_timeout_s`` and the whole by that plus
        :data:`EXIT_MARGIN_S`; what went wrong, in words (None: nothing)."""
        bound_s = self.config.write_timeout_s + EXIT_MARGIN_S
        try:
            self._close(None, bound_s)
        except TimeoutError:
            return (
                f"closing took longer than {bound_s:g} s: what was acknowledged and not yet "
                "durable is recorded as lost (Memory.dead_letters()) when it is next opened"
            )
        except Exception as exc:  # an exit hook reports, never raises
            return str(exc) if isinstance(exc, MemrayError) else f"{type(exc).__name__}: {exc}"
        return None

    async def aclose(self, terminate: bool | None = None) -> None:
        await asyncio.to_thread(self.close, terminate)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Memory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- handles ----------------------------------------------------------------------------
    @property
    def memory_service(self) -> MemoryServiceHandle:
        """The long-term memory service: entries per app/user/project, search, deletes."""
        self._runner.check_open()
        return MemoryServiceHandle(self._runner)

    @property
    def keys(self) -> KeysHandle:
        """The server's API keys (``memray serve``): create, list, revoke."""
        self._runner.check_open()
        return KeysHandle(self._runner)

    def conversation(
        self, user_id: str, conversation_id: str, app: str = "default", working_memory: WorkingMemorySpec | None = None
    ) -> ConversationHandle:
        """A handle to one conversation (created on first write). Cheap: no call is made.
        ``working_memory`` sets the note's scope and format (default: conversation scope, text)."""
        self._runner.check_open()
        return ConversationHandle(self._runner, ConversationKey.of(app, user_id, conversation_id), working_memory)

    # -- writes -----------------------------------------------------------------------------
    async def aadd_many(
        self,
        batch: Iterable[tuple[ConversationKey | ConversationHandle, Iterable[MessageInput]]],
        durable: bool = False,
        block: bool = True,
    ) -> list[list[int]]:
        """Add to many conversations at once: one call per host. Returns seqs per input item.
        ``block`` as for :meth:`ConversationHandle.add`; a host that refuses its part raises
        :class:`~memray.errors.Backpressure` whose ``refused`` lists the items not written."""
        session = self._runner.session
        items = _prepare_many(batch, session.config.max_message_chars)
        return await self._runner.arun(session.add_many(items, durable, block))

    add_many = blocking(aadd_many)

    async def aflush(self) -> None:
        """Make everything acknowledged so far durable, in every conversation. Raises
        :class:`~memray.errors.DeadLetterError` naming every message acknowledged and then lost
        (a host killed within the debounce window) or rejected by the store that no flush or
        durable add has named to a caller yet, waiting for a host Ray is restarting."""
        await self._runner.arun(self._runner.session.flush())

    flush = blocking(aflush)

    async def await_indexed(self, timeout_s: float = 60.0) -> bool:
        """Flush, then wait until every durable message is embedded and searchable."""
        return await self._runner.arun(self._runner.session.wait_indexed(timeout_s))

    wait_indexed = blocking(await_indexed)

    async def aexport(self, root: str | None = None) -> dict[str, Any]:
        """Export messages and entries to hive-partitioned Parquet under ``root`` (default
        ``config.exports_path``), incrementally; returns the manifest (rows, files, watermark).
        Layout: ``<root>/{messages,entries}/app_key=<key>/bucket=<n>/part-*.parquet``, every file
        holding the ``app`` column (``key`` is the app, or a prefix and a hash of a long one); read it with
        ``ray.data.read_parquet`` or DuckDB's ``read_parquet(..., hive_partitioning=true)``."""
        return await self._runner.arun(self._runner.session.export(root))

    export = blocking(aexport)

    # -- reads ------------------------------------------------------------------------------
    @overload
    async def acontext_many(
        self, calls: Iterable[ContextCall], return_exceptions: Literal[False] = False
    ) -> list[Context]: ...
    @overload
    async def acontext_many(self, calls: Iterable[ContextCall], return_exceptions: bool) -> list[Answer[Context]]: ...
    async def acontext_many(
        self, calls: Iterable[ContextCall], return_exceptions: bool = False
    ) -> list[Context] | list[Answer[Context]]:
        """Many ``conv.context()`` calls at once (``memray.ContextCall(conv, query, ...)``, the
        same arguments), with one call per host, one to the store and one per shard for them all.
        Answers in order, each what that ``context()`` would return at this point (read-your-writes
        included). Every call is checked first: a bad argument raises before anything runs,
        naming it (``calls[3].limit``). A call that would raise (its host failed) raises after the
        batch ran; with ``return_exceptions=True`` its error takes its place instead."""
        reads = reads_of(calls, ContextCall, context_read)
        return _answers(await self._runner.arun(self._runner.session.recall.context_many(reads)), return_exceptions)

    context_many = blocking(acontext_many)

    @overload
    async def asearch_many(
        self, calls: Iterable[SearchCall], return_exceptions: Literal[False] = False
    ) -> list[SearchResults]: ...
    @overload
    async def asearch_many(
        self, calls: Iterable[SearchCall], return_exceptions: bool
    ) -> list[Answer[SearchResults]]: ...
    async def asearch_many(
        self, calls: Iterable[SearchCall], return_exceptions: bool = False
    ) -> list[SearchResults] | list[Answer[SearchResults]]:
        """Many ``conv.search()`` calls at once (``memray.SearchCall(conv, query, ...)``), with
        one call per shard for them all; answers and errors as in :meth:`context_many`."""
        reads = reads_of(calls, SearchCall, search_read)
        return _answers(await self._runner.arun(self._runner.session.recall.search_many(reads)), return_exceptions)

    search_many = blocking(asearch_many)

    async def adead_letters(
        self, app: str | None = None, user_id: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        """Messages that were acknowledged but could not be stored (``kind="rejected"``: the
        store refused them; ``"lost"``: not yet durable when their host was killed), newest first.
        Each keeps its seq, which no other message is ever given. A conversation's next flush
        (or durable add) raises :class:`~memray.errors.DeadLetterError` naming its own."""
        validate_optional_id("app", app)
        validate_optional_id("user_id", user_id)
        rows = await self._runner.arun(self._runner.session.deployment.stores.dead_letters(app, user_id, limit))
        return [DeadLetter(*r) for r in rows]

    dead_letters = blocking(adead_letters)

    async def astats(self) -> list[dict[str, Any]]:
        """Each host's figures: conversations held, pending writes, commits, embedding failures,
        dead letters, messages lost on a restart, its pid and memory."""
        return await self._runner.arun(self._runner.session.stats())

    stats = blocking(astats)

    async def alist_conversations(
        self,
        user_id: str,
        app: str = "default",
        order: ConversationOrder = "updated_desc",
        limit: int = CONVERSATIONS_LIMIT,
        offset: int = 0,
    ) -> ConversationList:
        """A page of the user's conversations, ordered by ``updated_*``, ``created_*`` or
        ``title_*`` (``_asc``/``_desc``; untitled last; ties by conversation id), ``limit`` from
        ``offset``; ``.total`` counts them all."""
        validate_id("user_id", user_id)
        validate_id("app", app)
        args = (check_order(order), check_limit(limit, CONVERSATIONS_LIMIT), check_count(offset, "offset"))
        return await self._runner.arun(self._runner.session.list_conversations(app, user_id, *args))

    list_conversations = blocking(alist_conversations)

    async def asearch_app(
        self,
        app: str,
        query: str,
        limit: int = SEARCH_LIMIT,
        mode: RetrievalMode | None = None,
        min_score: float | None = None,
        *,
        scoring: Scoring | None = None,
        after: SimTime | None = None,
        before: SimTime | None = None,
        created_after: SimTime | None = None,
        created_before: SimTime | None = None,
    ) -> SearchResults:
        """Search every conversation of every user of ``app`` (an explicit app-wide operation:
        it fans out to every shard). Scores, ``scoring`` and the time bounds as in
        :meth:`ConversationHandle.search`."""
        validate_id("app", app)
        search = self._runner.session.recall.search_app(
            app,
            check_query(query),
            check_limit(limit, SEARCH_LIMIT),
            check_min_score(min_score),
            check_mode(mode),
            stream_of(scoring),
            window(after, before, created_after, created_before),
        )
        return await self._runner.arun(search)

    search_app = blocking(asearch_app)

    # -- forks ----------------------------------------------------------------------------
    # (written sync and async: opening a memray starts Ray and a loop thread from the caller's
    # thread, which a coroutine on memray's own loop must not do)
    def fork(self, path: str, mode: RunMode | None = None, **options: Any) -> Memory:
        """A consistent copy of this whole memray at one point in time, taken while agents keep
        writing, opened as an independent memray at ``path``: with this memray's configuration,
        or in ``mode`` and with ``options`` changed (any option of :func:`open`: ``namespace=``
        runs it in another Ray namespace). Both can be written at once. Everything acknowledged
        before the call is in it; see :mod:`memray.runtime.fork` and docs/simulations.md for the
        guarantee. Close the fork when done; ``fork_info`` has timings. To open it elsewhere —
        another process, another Ray — :meth:`fork_to` copies without opening."""
        target = check_fork_path(self.config.root, path)
        config = _configured(self.config, target, mode, options)  # a bad option fails before the copy
        return self._open_fork(config, self.fork_to(target))

    async def afork(self, path: str, mode: RunMode | None = None, **options: Any) -> Memory:
        target = check_fork_path(self.config.root, path)
        config = _configured(self.config, target, mode, options)
        return await asyncio.to_thread(self._open_fork, config, await self.afork_to(target))

    async def afork_to(self, path: str) -> dict[str, Any]:
        """Fork into the new data directory ``path`` (as :meth:`fork` does) without opening it:
        ``memray.open(path, ...)`` then opens it in any mode, in any process, while this memray
        runs. Returns the timings and sizes :meth:`fork` puts in ``fork_info``."""
        target = check_fork_path(self.config.root, path)
        return await self._runner.arun(self._runner.session.fork(target))

    fork_to = blocking(afork_to)

    def _open_fork(self, config: MemoryConfig, info: dict[str, Any]) -> Memory:
        fork = Memory(config)
        fork._owns_actors = config.address is None
        fork.fork_info = info
        return fork._start()

    # -- deletes and erasure ----------------------------------------------------------------
    async def adelete_user(self, *, user_id: str, app: str = "default") -> DeletionReceipt:
        """Erase the user everywhere: conversations, messages, entries, working memory,
        summaries, vectors in every shard and their snapshots, Parquet exports, caches. Returns
        counts per store. Keyword-only, so app and user cannot be swapped by position."""
        return await self._runner.arun(self._runner.session.erase(app, user_id))

    delete_user = blocking(adelete_user)

    async def averify_deleted(self, *, user_id: str, app: str = "default") -> DeletionProof:
        """Scan every store for the user; ``.clean`` is True when nothing of them remains."""
        return await self._runner.arun(self._runner.session.verify(app, user_id))

    verify_deleted = blocking(averify_deleted)


def _prepare_many(
    batch: Iterable[tuple[Any, Iterable[MessageInput]]], max_chars: int
) -> list[tuple[ConversationKey, list[Message]]]:
    out = []
    for target, msgs in batch:
        key = target.key if isinstance(target, ConversationHandle) else target
        if not isinstance(key, ConversationKey):
            raise ValidationError("conversation", target, "must be a ConversationKey or a conversation handle")
        out.append((key, coerce_messages(msgs, max_chars)))
    return out


def _answers(answers: list[Answer[T]], return_exceptions: bool) -> list[Answer[T]]:
    """A batch's answers; unless ``return_exceptions``, the first error among them raised."""
    if not return_exceptions:
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
    return answers


def _held_by_ray(config: MemoryConfig) -> bool:
    """A ray-mode memray another process runs holds ``config``'s data directory (one that
    cannot be joined does not count)."""
    try:
        return running_memray(config) is not None
    except StoreError:
        return False


def _ray_is_up() -> bool:
    from memray.runtime.actors import ray_is_up  # (ray: only in mode='ray')

    return ray_is_up()
