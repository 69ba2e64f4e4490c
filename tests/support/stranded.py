"""A message stranded between the store and its shard, as a host killed at the wrong moment leaves
it: used by the restart-leveling tests, in-process and under a real Ray restart."""

from __future__ import annotations

import memray
from memray.ids import ConversationKey, Namespace, conversation_namespace, user_hash
from memray.index.client import ShardClient
from memray.models import Message, TextPart
from memray.models.wire import RefList
from memray.store.rows import EmbeddingRow, message_to_row


def stranded(
    mem: memray.Memory, key: ConversationKey, text: str, seq: int
) -> tuple[tuple[Namespace, str], ShardClient]:
    """A message its host committed and its pipeline marked embedded in the store (the static
    model's vectors are recomputed, not stored), the shard upsert lost: the host died between the
    two. Its ref, and its shard, which lacks it."""
    run = mem.internals.run
    dep = mem.internals.deployment
    shard = dep.shards[user_hash(key.app, key.user_id) % len(dep.shards)]
    lost = Message(role="user", parts=[TextPart(text=text)], seq=seq)
    ref = (conversation_namespace(key), lost.id)
    assert run(dep.stores.commit_messages([message_to_row(key, lost)])).rejected == []
    model = str(run(shard.stats())["model_id"])
    assert run(dep.stores.put_embeddings([EmbeddingRow(*ref, model, None)])) == 1
    assert run(shard.missing_from(RefList([ref]), vectors=True)) == [ref]
    return ref, shard
