"""Caps everywhere: each is stated in the OpenAPI schema, and a request past one is a
422 (or 413 for the body) problem naming the field, the cap and the value — and nothing is
written. One probe per cap, against the real server."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from memray.arguments import SEARCH_LIMIT
from memray.errors import Backpressure
from memray.server import limits
from memray.server.problems import of_error
from tests.support.serve import APP, Served

USER = f"/v1/apps/{APP}/users/capped"
CONV = USER + "/conversations/c"


def capped(response: httpx.Response, cap: float, value: Any, status: int = 422) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["cap"] == cap and body["value"] == value, body
    assert str(cap) in body["detail"], body["detail"]
    return body


def message(text: str = "x") -> dict[str, str]:
    return {"role": "user", "content": text}


def test_the_schema_states_every_cap(served: Served) -> None:
    components = httpx.get(served.url + "/openapi.json").json()["components"]["schemas"]
    assert components["AddMessages"]["properties"]["messages"]["maxItems"] == limits.MAX_MESSAGES_PER_ADD
    assert components["AddEntries"]["properties"]["entries"]["maxItems"] == limits.MAX_ENTRIES_PER_ADD
    assert components["BatchAdd"]["properties"]["items"]["maxItems"] == limits.MAX_BATCH_ITEMS
    assert components["BatchSearch"]["properties"]["searches"]["maxItems"] == limits.MAX_BATCH_ITEMS
    search = components["SearchIn"]["properties"]
    assert search["limit"]["maximum"] == limits.MAX_LIMIT and search["limit"]["default"] == SEARCH_LIMIT
    assert search["query"]["maxLength"] == limits.MAX_QUERY_CHARS
    assert components["WorkingMemoryIn"]["properties"]["content"]["maxLength"] == limits.MAX_TEXT_CHARS
    paths = httpx.get(served.url + "/openapi.json").json()["paths"]
    params = {
        p["name"]: p["schema"] for p in paths["/v1/apps/{app}/users/{user_id}/conversations"]["get"]["parameters"]
    }
    assert params["limit"]["maximum"] == limits.MAX_LIMIT and params["offset"]["maximum"] == limits.MAX_OFFSET


def test_each_cap_refuses_naming_cap_and_value(served: Served) -> None:
    n = limits.MAX_MESSAGES_PER_ADD + 1
    with served.client("admin") as http:
        body = capped(http.post(CONV + "/messages", json={"messages": [message()] * n}), n - 1, n)
        assert body["field"] == "body.messages"
        capped(http.post(USER + "/entries", json={"entries": [{"content": "x"}] * 101}), 100, 101)
        items = [{"user_id": "capped", "conversation_id": "c", "messages": [message()]}] * 101
        capped(http.post(f"/v1/apps/{APP}/messages/batch", json={"items": items}), 100, 101)
        searches = [{"user_id": "capped", "conversation_id": "c", "query": "x"}] * 101
        capped(http.post(f"/v1/apps/{APP}/search/batch", json={"searches": searches}), 100, 101)
        huge = 1_000_000_000
        body = capped(http.get(USER + "/conversations", params={"limit": huge}), limits.MAX_LIMIT, huge)
        assert body["field"] == "query.limit" and "SELECT" not in body["detail"]
        capped(http.get(USER + "/conversations", params={"offset": huge}), limits.MAX_OFFSET, huge)
        capped(http.get(CONV + "/messages", params={"limit": huge}), limits.MAX_LIMIT, huge)
        capped(http.post(CONV + "/search", json={"query": "x", "limit": huge}), limits.MAX_LIMIT, huge)
        long_query = "q" * (limits.MAX_QUERY_CHARS + 1)
        capped(http.post(CONV + "/search", json={"query": long_query}), limits.MAX_QUERY_CHARS, len(long_query))
        long_id = "i" * (limits.MAX_ID_CHARS + 1)
        capped(http.post(CONV + "/messages", json={"messages": [{**message(), "id": long_id}]}), 256, 257)
        ids = [f"m{i}" for i in range(limits.MAX_IDS_PER_DELETE + 1)]
        capped(http.request("DELETE", USER + "/entries", params={"ids": ids}), 1000, 1001)
    assert served.mem.list_conversations("capped", APP).total == 0  # nothing of the above was written


@pytest.mark.parametrize("chunked", [False, True])
def test_the_body_cap_names_cap_and_size(served: Served, chunked: bool) -> None:
    size = 300 * 1024  # the served app's cap is 256 KiB
    payload = b'{"messages": [{"role": "user", "content": "' + b"x" * size + b'"}]}'
    content = iter([payload]) if chunked else payload
    with served.client("admin") as http:
        r = http.post(CONV + "/messages", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["cap"] == 256 * 1024 and r.json()["value"] > 256 * 1024


def test_a_batch_refused_in_part_says_which_items_were_not_written() -> None:
    status, body, headers = of_error(Backpressure(host=1, pending=10, bound=10, refused=[1, 3]))
    assert status == 429 and body["refused"] == [1, 3] and headers["Retry-After"] == "1"
    assert "2 batch items were not written" in body["detail"]


def test_messages_lost_earlier_are_each_named_in_a_problem_that_does_not_ask_for_a_retry() -> None:
    """A durable add that reports losses (buffered messages of the conversation lost in a host
    kill) answers 500 listing every one: a 503 asked for a retry that brings nothing back, and
    its detail named only the first three (the chaos soak counted REST losses as unnamed)."""
    from memray.errors import DeadLetterError

    letters = [("a", "u", "main", f"m{i}", 10 + i, "lost", "host 0 stopped") for i in range(5)]
    status, body, headers = of_error(DeadLetterError(letters))
    assert status == 500 and "Retry-After" not in headers and body["error"] == "DeadLetterError"
    assert [(d["id"], d["seq"], d["kind"]) for d in body["dead_letters"]] == [
        (f"m{i}", 10 + i, "lost") for i in range(5)
    ]
    assert {d["conversation_id"] for d in body["dead_letters"]} == {"main"}
