"""Write first, then embed: an embedder that fails does not fail the add. The entries are durable,
searchable lexically at once, and embedded by the pipeline's retries once the endpoint recovers."""

from __future__ import annotations

import time

import memray
from memray import SearchRequest
from memray.config import EmbedderConfig


def test_add_survives_embedding_failure_and_entries_are_embedded_later(tmp_path, openai_server):
    cfg = memray.MemoryConfig(
        path=str(tmp_path / "data"),
        mode="inprocess",
        hosts=1,
        shards=1,
        retry_backoff_s=0.05,
        retry_backoff_max_s=0.2,
        embedder=EmbedderConfig(
            kind="openai",
            model="fake-embed",
            dim=64,
            base_url=openai_server.url,
            max_retries=0,
            timeout_s=5,
            cache_size=0,
        ),
    )
    with memray.open(config=cfg) as mem:
        svc = mem.memory_service
        openai_server.fail_always(500)
        ids = svc.add_entries(
            "app",
            "u",
            ["the lighthouse keeper's logbook", "a recipe for fig jam"],
            session_id="s",
            replace_session=True,
        )
        assert openai_server.count("/v1/embeddings") >= 1  # it was tried, and failed

        rows = mem.internals.run(mem.internals.deployment.stores.get_entries("app", "u", ids))
        assert [r.text for r in rows] == ["the lighthouse keeper's logbook", "a recipe for fig jam"]  # durable
        resp = svc.search(SearchRequest(query="lighthouse keepers", user_id="u", app_name="app"))
        assert [r.entry.id for r in resp.memories] == [ids[0]]  # lexical, since the query cannot be embedded
        assert resp.degraded and "embedding" in (resp.reason or "")
        pending = mem.internals.run(mem.internals.deployment.stores.pending_embeddings("openai:fake-embed:64", 100))
        assert {doc for _ns, doc, _text in pending} >= set(ids)

        openai_server.clear_failures()
        deadline = time.monotonic() + 30
        while True:
            pending = mem.internals.run(mem.internals.deployment.stores.pending_embeddings("openai:fake-embed:64", 100))
            vector_hits = svc.search(SearchRequest(query="fig jam recipe", user_id="u", app_name="app", mode="vector"))
            if not pending and [r.entry.id for r in vector_hits.memories][:1] == [ids[1]]:
                break
            assert time.monotonic() < deadline, f"still pending: {pending}"
            time.sleep(0.05)
        assert vector_hits.memories[0].entry.id == ids[1] and not vector_hits.degraded
