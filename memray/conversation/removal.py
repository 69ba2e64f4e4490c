"""`MessageRemoval`: deleting some or all messages of a conversation a host holds.

A removal reaches everywhere a message lives: the host's buffer and read-your-writes tail, the
embedding queue (queued work is dropped; a batch in flight lands first, so its vectors can be
deleted), the store (rows, vectors, exported rows) and the shards. The conversation's writes are
flushed first, so no pending write lands after the removal. Seqs are not reused.
"""

from __future__ import annotations

import asyncio

from memray.conversation.state import Conversation
from memray.conversation.summary import SummaryKeeper
from memray.embedding.pipeline import EmbeddingPipeline
from memray.ids import ConversationKey, conversation_namespace
from memray.index.router import ShardRouter
from memray.store.partitions import StorePartitions

__all__ = ["MessageRemoval"]


class MessageRemoval:
    def __init__(
        self, store: StorePartitions, router: ShardRouter, pipeline: EmbeddingPipeline, keeper: SummaryKeeper | None
    ) -> None:
        self._store = store
        self._router = router
        self._pipeline = pipeline
        self._keeper = keeper

    async def delete(self, conv: Conversation, ids: list[str], timeout_s: float = 60.0) -> dict[str, int]:
        """Delete the messages ``ids`` of ``conv`` everywhere (module docstring). Returns counts
        per store, ``vectors`` included."""
        key = conv.key
        await conv.flush(timeout_s)
        for message_id in ids:
            conv.buffer.discard(message_id)
        ns = conversation_namespace(key)
        refs = [(ns, i) for i in ids]
        self._pipeline.forget_items(refs)
        await self._pipeline.wait_idle(timeout_s)
        counts: dict[str, int] = await self._store.delete_messages(key, ids)
        counts["vectors"] = await self._router.delete(refs)
        return counts

    async def clear(self, conv: Conversation, timeout_s: float = 60.0) -> dict[str, int]:
        """Delete every message the conversation has acknowledged so far, with their vectors,
        exported rows and its summary; the conversation, its working memory and its seqs stay
        (new messages continue after the last seq). Messages added while it runs are kept.
        Returns counts per store (``vectors`` included)."""
        key = conv.key
        upto = conv.last_seq
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while conv.summarizing and loop.time() < deadline:  # a fold in flight must not land afterwards
            await asyncio.sleep(0.01)
        await conv.flush(timeout_s)
        for msg in conv.buffer.recent():  # (no await since the flush: no write of these can start)
            if (msg.seq or 0) <= upto:
                conv.buffer.discard(msg.id)
        if conv.unindexed:
            conv.unindexed = {i: m for i, m in conv.unindexed.items() if (m.seq or 0) > upto} or None
        ns = conversation_namespace(key)
        self._pipeline.forget_if(lambda item: item.namespace == ns and item.recency <= upto)
        await self._pipeline.wait_idle(timeout_s)
        counts: dict[str, int]
        counts, ids = await self._store.clear_messages(key, upto)
        counts["vectors"] = await self._router.delete([(ns, i) for i in ids])
        if self._keeper is not None:
            self._keeper.forget(key)
        conv.unsummarized_tokens = -1  # recounted by the keeper on the next write
        return counts

    def count(self, key: ConversationKey, conv: Conversation | None, ids: list[str] | None = None) -> dict[str, int]:
        """What this host holds of the conversation's messages (only ``ids`` when given): in the
        buffer or the read-your-writes tail, and queued for embedding (a deletion check)."""
        wanted = None if ids is None else set(ids)
        ns = conversation_namespace(key)
        held: set[str] = set()
        if conv is not None:
            held = {m.id for m in conv.buffer.recent()} | set(conv.unindexed or ())
        queued = self._pipeline.count_if(
            lambda item: item.namespace == ns and (wanted is None or item.doc_id in wanted)
        )
        return {"host_messages": len(held if wanted is None else held & wanted), "host_queued": queued}
