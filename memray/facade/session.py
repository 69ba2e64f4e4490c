"""`Session`: what an open memray is made of.

Its deployment (the clients of the store, the shards and the hosts: Ray actors, or cores in this
process), the hosts' clients with retries, and the cores that run in the caller's process — the
shard router, the query encoder and its embedder (calibrated per model), recall and the long-term
service. A re-embedding job may switch the active model while memray runs: :meth:`check_model`
follows it before each search. What a call needs of more than one part (an ``add_many`` split by
host, a flush of every host, leveling every shard, deletes and erasure) is done here; the facade
validates, routes and offers it sync and async.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

from memray.config import MemoryConfig
from memray.conversation.client import HostClient
from memray.conversation.recall import CONTEXT_STEP, Recall
from memray.embedding import build_embedder
from memray.embedding.active import ModelWatcher, holds_data, record_default, resolve_config
from memray.embedding.base import Embedder
from memray.embedding.calibration import Calibration, calibration_of
from memray.embedding.query import QueryEncoder
from memray.errors import Backpressure, DeadLetterError, StoreError, ValidationError
from memray.ids import ConversationKey
from memray.index.keeper import level_all
from memray.index.router import ShardRouter
from memray.models import ConversationInfo, ConversationOrder, DeletionProof, DeletionReceipt, Message
from memray.models.wire import MessageBatch
from memray.rpc.batch import Answer
from memray.runtime.deploy import Deployment, LocalDeployment
from memray.runtime.fork import fork_deployment
from memray.service.erasure import erase_user, verify_user_deleted
from memray.service.longterm import MemoryService

__all__ = ["Session", "ConversationList", "check_path", "raise_unpersisted"]


class ConversationList(list[ConversationInfo]):
    """A page of conversations; ``total`` is how many the user has in all."""

    total: int = 0


@dataclass
class Session:
    config: MemoryConfig  # as resolved: the active model a re-embedding job recorded wins
    deployment: Deployment
    hosts: list[HostClient]  # the deployment's, retried while Ray restarts them
    embedder: Embedder | None
    router: ShardRouter
    encoder: QueryEncoder
    recall: Recall
    service: MemoryService
    watcher: ModelWatcher

    @classmethod
    async def start(cls, config: MemoryConfig) -> Session:
        """Start the deployment ``config`` describes and the cores that run in this process."""
        existing = holds_data(config.root)
        if existing:
            record_default(config, existing)  # made before models were recorded: it keeps the model it was made with
        watcher = ModelWatcher(config.root)
        config = resolve_config(config)
        if config.mode == "ray":
            # imports ray (150 ms), needed only in mode='ray': memray imports without it (tests/test_layers.py)
            from memray.runtime.actors import RayDeployment

            deployment: Deployment = RayDeployment(config)
        else:
            deployment = LocalDeployment(config)
        await deployment.start()
        if not existing:
            record_default(config, existing)  # a new directory keeps today's default, whatever a later one is
        # calls to a host are retried while Ray restarts it (they are idempotent; a retried add
        # asks the host for the seqs its first attempt got)
        hosts = [host.retrying() for host in deployment.hosts]
        embedder = build_embedder(config.embedder)
        router = ShardRouter(deployment.shards)
        encoder = QueryEncoder(embedder, await asyncio.to_thread(_calibration, config, embedder))
        recall = Recall(
            encoder,
            router,
            deployment.stores,
            config.index.mode,
            lambda key: hosts[key.route(len(hosts))],
            config.index.neighbour_weight,
        )
        recall.keep_messages = config.summarizer.keep_messages
        if config.mode == "inprocess":  # the cores share memray's loop: contexts made in steps
            recall.step = CONTEXT_STEP
        service = MemoryService(
            deployment.stores,
            router,
            encoder,
            config.index.mode,
            batch_size=config.embedder.batch_size,
            backoff_s=config.retry_backoff_s,
            backoff_max_s=config.retry_backoff_max_s,
        )
        session = cls(config, deployment, hosts, embedder, router, encoder, recall, service, watcher)
        recall.before_search = session.check_model
        service.before_search = session.check_model
        return session

    def host_for(self, key: ConversationKey) -> HostClient:
        """The (retrying) client of the host of ``key``."""
        return self.hosts[key.route(len(self.hosts))]

    def check_model(self) -> None:
        """Switch the query embedder if a re-embedding job recorded a new model (one ``stat``)."""
        record = self.watcher.changed()
        if record is not None and record.embedder != self.config.embedder:
            self.embedder = build_embedder(record.embedder)
            self.config = self.config.model_copy(update={"embedder": record.embedder})
            self.encoder.set_embedder(self.embedder, _calibration(self.config, self.embedder))
            self.service.set_embedder(self.embedder)

    # -- what a call needs of more than one part ------------------------------------------
    async def add(self, key: ConversationKey, messages: list[Message], durable: bool, block: bool) -> list[int]:
        """Add to one conversation; what its host acknowledged is kept for read-your-writes."""
        seqs = await self.host_for(key).add(key, messages, durable, block=block)
        self.recall.written.add(key, messages, seqs)
        return seqs

    async def add_many(
        self, batch: list[tuple[ConversationKey, list[Message]]], durable: bool, block: bool = True
    ) -> list[list[int]]:
        """One call per host; the seqs per input item, in input order. Hosts that refuse their
        part (backpressure) make it raise :class:`Backpressure` naming the items not written."""
        parts, results = await self._add_parts(batch, durable, block)
        DeadLetterError.raise_gathered([r for r in results if not isinstance(r, Backpressure)])
        refused = sorted(i for idx, got in zip(parts, results) if isinstance(got, Backpressure) for i in idx)
        if refused:
            first = next(r for r in results if isinstance(r, Backpressure))
            raise Backpressure(first.host, first.pending, first.bound, first.waited_s, refused)
        out: list[list[int]] = [[] for _ in batch]
        for idx, got in zip(parts, results):
            if not isinstance(got, BaseException):  # (none is left: raised above)
                for i, seqs in zip(idx, got):
                    out[i] = seqs
        return out

    async def add_each(self, batch: list[tuple[ConversationKey, list[Message]]]) -> list[Answer[list[int]]]:
        """:meth:`add_many` (not durable, waiting for room) answering each item on its own: its
        seqs, or the error of its host's part (the coalesced adds of many callers,
        :mod:`memray.facade.coalesce`)."""
        parts, results = await self._add_parts(batch, False, True)
        out: list[Answer[list[int]]] = [[] for _ in batch]
        for idx, got in zip(parts, results):
            for n, i in enumerate(idx):
                out[i] = got if isinstance(got, BaseException) else got[n]
        return out

    async def _add_parts(
        self, batch: list[tuple[ConversationKey, list[Message]]], durable: bool, block: bool
    ) -> tuple[list[list[int]], list[list[list[int]] | BaseException]]:
        """One ``add_many`` per host: the items each host got, and its answer or error. What a
        host acknowledged is kept for this process's read-your-writes."""
        hosts = self.hosts
        groups: dict[int, list[int]] = {}
        for i, (key, _) in enumerate(batch):
            groups.setdefault(key.route(len(hosts)), []).append(i)
        # to a Ray actor the messages travel as columns (memray.models.wire); in-process as they are
        wire = MessageBatch.encode if self.config.mode == "ray" else list
        results = await asyncio.gather(
            *(hosts[h].add_many(wire([batch[i] for i in idx]), durable, block=block) for h, idx in groups.items()),
            return_exceptions=True,
        )
        for idx, got in zip(groups.values(), results):
            if isinstance(got, BaseException):
                if not isinstance(got, Exception):
                    raise got
                continue
            for i, seqs in zip(idx, got):
                self.recall.written.add(batch[i][0], batch[i][1], seqs)
        return list(groups.values()), results

    async def flush(self) -> None:
        """Make everything acknowledged durable on every host. Raises the dead letters of every
        host as one DeadLetterError, else the first other error. A host Ray is restarting is
        waited for (its retrying client), as an add is: its losses are what the flush reports."""
        results = await asyncio.gather(*(h.flush() for h in self.hosts), return_exceptions=True)
        DeadLetterError.raise_gathered(results)

    async def wait_indexed(self, timeout_s: float) -> bool:
        """Flush, let every host embed and index what it holds, then level every shard with the store."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        done = await asyncio.gather(*(h.wait_indexed(timeout_s) for h in self.deployment.hosts))
        if not all(done):
            return False
        # every committed, embedded item must have its vector in its shard: level each with the store
        leveled = await level_all(self.deployment.stores, self.deployment.shards, max(0.0, deadline - loop.time()))
        return leveled.level

    async def delete_conversation(self, key: ConversationKey) -> dict[str, int]:
        """Its host forgets it, the store deletes it (with its exports), its shard drops it."""
        await self.host_for(key).evict(key)  # pending writes dropped, in-flight ones awaited
        self.recall.written.forget(key)
        counts = await self.deployment.stores.delete_conversation(key)
        counts["vectors"] = await self.router.drop(key.app, key.user_id, "conv", key.conversation_id)
        return counts

    async def clear(self, key: ConversationKey) -> dict[str, int]:
        """Every message of the conversation goes (it, its working memory and its seqs stay)."""
        self.recall.written.forget(key)
        return await self.host_for(key).clear(key)

    async def delete_messages(self, key: ConversationKey, ids: list[str]) -> dict[str, int]:
        """These messages go from every store (and from what this process keeps for search)."""
        self.recall.written.forget(key, ids)
        return await self.host_for(key).delete_messages(key, ids)

    async def erase(self, app: str, user_id: str) -> DeletionReceipt:
        """``delete_user`` across every part (:func:`memray.service.erasure.erase_user`)."""
        dep = self.deployment
        return await erase_user(
            dep.stores, dep.shards, dep.hosts, self.service, self.embedder, app, user_id, self.recall, dep.keyring()
        )

    async def verify(self, app: str, user_id: str) -> DeletionProof:
        """``verify_deleted`` across every part (:func:`memray.service.erasure.verify_user_deleted`)."""
        dep = self.deployment
        return await verify_user_deleted(
            dep.stores, dep.shards, dep.hosts, self.service, self.config, app, user_id, self.recall
        )

    async def export(self, root: str | None) -> dict[str, Any]:
        """Flush every host, then export (:meth:`HistoryStore.export_parquet`)."""
        await self.flush()
        return await self.deployment.stores.export_parquet(root or self.config.exports_path)

    async def stats(self) -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(h.stats() for h in self.deployment.hosts)))

    async def list_conversations(
        self, app: str, user_id: str, order: ConversationOrder, limit: int, offset: int
    ) -> ConversationList:
        store = self.deployment.stores
        found, total = await asyncio.gather(
            store.list_conversations(app, user_id, order, limit, offset), store.count_conversations(app, user_id)
        )
        out = ConversationList(ConversationInfo.model_validate(r) for r in found)
        out.total = int(total)
        return out

    async def fork(self, target: str) -> dict[str, Any]:
        """A fork of the deployment at ``target`` (:func:`memray.runtime.fork.fork_deployment`)."""
        return await fork_deployment(self.deployment, self.config, target, self.service.pipeline.unconfirmed)

    async def stop(self, terminate: bool) -> list[dict[str, Any]]:
        """Stop the service, then the deployment (see :meth:`Deployment.stop`); the hosts' reports."""
        await self.service.close()
        return await self.deployment.stop(terminate)


def _calibration(config: MemoryConfig, embedder: Embedder | None) -> Calibration:
    """``embedder``'s relevance threshold and vector weight (measured once per model and data
    directory, :mod:`memray.embedding.calibration`), with the configured overrides."""
    if embedder is None:
        return Calibration(1.0, 0.0)
    threshold, weight = calibration_of(config.root, embedder)
    if config.embedder.min_similarity is not None:
        threshold = config.embedder.min_similarity
    if config.index.vector_weight is not None:
        weight = config.index.vector_weight
    return Calibration(threshold, weight)


def raise_unpersisted(reports: list[dict[str, Any]]) -> None:
    """Raise StoreError if the hosts' close reports (:meth:`Session.stop`) say something
    acknowledged was not made durable or was dead-lettered, naming the conversations."""
    lost = sum(int(r.get("unpersisted", 0)) for r in reports)
    dead = sum(int(r.get("dead_letters", 0)) for r in reports)
    errors = [f"{r.get('host', '?')}: {r['error']}" for r in reports if r.get("error")]
    if lost or dead or errors:
        where = ["/".join(key) for r in reports for key in r.get("unpersisted_in", [])]
        named = f" in conversation(s) {', '.join(where)} (app/user/conversation)" if where else ""
        dead_part = f" and {dead} were dead-lettered" if dead else ""
        raise StoreError(
            f"closed, but {lost} acknowledged message(s){named} could not be made durable{dead_part} "
            f"({'; '.join(errors)[:500]}); they are listed by Memory.dead_letters() once the data directory "
            "is opened again"
        )


def check_path(config: MemoryConfig) -> None:
    """The data directory: a directory, or one that can be created (it is, once memray starts);
    never a file. Nothing is created here: an open that fails later leaves no folder behind."""
    path = config.path
    if os.path.exists(config.root) and not os.path.isdir(config.root):
        raise ValidationError(
            "path",
            path,
            "is a file, not a directory",
            "give a directory (memray creates it if missing and keeps history.duckdb, vectors/ and exports/ in it)",
        )
    parent = config.root
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise ValidationError(
            "path",
            path,
            f"cannot be created: {parent} is not a directory you can write to",
            "give a directory you can write to",
        )
