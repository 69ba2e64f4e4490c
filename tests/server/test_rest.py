"""The REST API against a real Serve app: each route does what the facade does, and says so."""

from __future__ import annotations

from tests.support.serve import APP, Served

CONV = f"/v1/apps/{APP}/users/ada/conversations/trip"


def test_add_then_search_context_and_list_see_the_write(served: Served) -> None:
    with served.client("admin") as http:
        r = http.post(
            CONV + "/messages",
            json={
                "messages": [
                    {"role": "user", "content": "I'm flying to Lisbon on 12 May; I'm vegetarian."},
                    {"role": "assistant", "content": "Noted: Lisbon, vegetarian meals."},
                ]
            },
        )
        assert r.status_code == 200, r.text
        ack = r.json()
        assert len(ack["seqs"]) == 2 and ack["seqs"][1] == ack["seqs"][0] + 1
        assert ack["durable"] is False and ack["in_context"] is True and ack["searchable"] is True
        hits = http.post(CONV + "/search", json={"query": "vegetarian meals", "limit": 1}).json()
        assert [h["message"]["seq"] for h in hits["hits"]] == [ack["seqs"][1]] or hits["hits"][0]["score"] > 0
        ctx = http.post(CONV + "/context", json={"query": "when do I fly?", "limit": 1, "semantic_limit": 1}).json()
        assert ctx["degraded"] is False and ack["seqs"][0] in [m["seq"] for m in ctx["messages"]]
        listed = http.get(CONV + "/messages", params={"limit": 10, "roles": ["assistant"]}).json()
        assert [m["seq"] for m in listed["messages"]] == [ack["seqs"][1]]
        durable = http.post(CONV + "/messages", json={"messages": [{"role": "user", "content": "x"}], "ack": "durable"})
        assert durable.json()["durable"] is True
        assert served.mem.conversation("ada", "trip", APP).durable_seq() >= durable.json()["seqs"][0]
        convs = http.get(f"/v1/apps/{APP}/users/ada/conversations").json()
        assert convs["total"] >= 1 and "trip" in [c["conversation_id"] for c in convs["conversations"]]


def test_working_memory_summary_deletes_and_clear(served: Served) -> None:
    conv = f"/v1/apps/{APP}/users/bob/conversations/c1"
    with served.client("admin") as http:
        seqs = http.post(conv + "/messages", json={"messages": [{"role": "user", "content": "a"}] * 1}).json()["seqs"]
        wm = http.put(conv + "/working-memory", json={"content": "likes tea"}).json()
        assert wm["content"] == "likes tea" and wm["version"] == 1
        stale = http.put(conv + "/working-memory", json={"content": "x", "mode": "replace", "expected_version": 0})
        assert stale.status_code == 409 and stale.json()["error"] == "ConflictError"
        assert http.get(conv + "/working-memory").json()["content"] == "likes tea"
        assert http.get(conv + "/summary").json() == {"summary": None}
        ids = [m["id"] for m in http.get(conv + "/messages").json()["messages"]]
        assert http.request("DELETE", conv + "/messages", params={"ids": ids[:1]}).status_code == 200
        assert http.get(conv + "/messages").json()["messages"] == []
        http.post(conv + "/messages", json={"messages": [{"role": "user", "content": "b"}]})
        assert http.post(conv + "/clear", json={}).status_code == 200
        assert http.get(conv + "/messages").json()["messages"] == []
        again = http.post(conv + "/messages", json={"messages": [{"role": "user", "content": "c"}]}).json()
        assert again["seqs"][0] > seqs[0] + 1  # seqs are never reused
        assert http.delete(conv).status_code == 200
        assert http.get(conv + "/working-memory").json()["content"] is None


def test_entries_projects_and_user_erasure(served: Served) -> None:
    user = f"/v1/apps/{APP}/users/cleo"
    with served.client("admin") as http:
        added = http.post(user + "/entries", json={"entries": [{"content": "I prefer dark mode"}]}).json()
        assert added["durable"] is True and added["searchable"] is True and len(added["ids"]) == 1
        http.post(user + "/entries", json={"entries": [{"content": "dark roast coffee"}], "project_id": "p1"})
        glob = http.post(user + "/entries/search", json={"query": "dark"}).json()["memories"]
        both = http.post(user + "/entries/search", json={"query": "dark", "project_id": "p1"}).json()["memories"]
        assert len(glob) == 1 and len(both) == 2
        assert len(http.get(user + "/entries", params={"project_id": "p1"}).json()["memories"]) == 1
        deleted = http.post(user + "/entries/delete", json={"query": "coffee", "project_id": "p1"}).json()
        assert sum(deleted["counts"].values()) >= 1
        assert http.request("DELETE", user + "/entries", params={"ids": added["ids"]}).status_code == 200
        assert http.post(user + "/entries/search", json={"query": "dark"}).json()["memories"] == []
        http.post(
            user + "/conversations/c/messages", json={"messages": [{"role": "user", "content": "hi"}], "ack": "durable"}
        )
        receipt = http.delete(user).json()
        assert receipt["app"] == APP and receipt["user_id"] == "cleo" and receipt["counts"]["messages"] >= 1
    assert served.mem.verify_deleted(app=APP, user_id="cleo").clean


def test_batches_answer_per_item(served: Served) -> None:
    with served.client("admin") as http:
        items = [
            {"user_id": f"u{i}", "conversation_id": "c", "messages": [{"role": "user", "content": f"fact {i} kiwi"}]}
            for i in range(3)
        ]
        out = http.post(f"/v1/apps/{APP}/messages/batch", json={"items": items}).json()
        assert [r["seqs"] for r in out["results"]] == [[1], [1], [1]]
        searches = [{"user_id": f"u{i}", "conversation_id": "c", "query": "kiwi"} for i in range(3)]
        found = http.post(f"/v1/apps/{APP}/search/batch", json={"searches": searches}).json()["results"]
        assert [r["hits"][0]["message"]["parts"][0]["text"] for r in found] == [f"fact {i} kiwi" for i in range(3)]


def test_errors_are_problem_details_naming_the_memray_error_and_field(served: Served) -> None:
    with served.client("admin") as http:
        bad = http.post(CONV + "/search", json={"query": "x", "limit": 0})
        assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
        assert bad.json()["error"] == "ValidationError" and bad.json()["field"] == "body.limit"
        missing = http.post(CONV + "/messages", json={"messages": [{"content": "no role"}]})
        assert missing.status_code == 422 and missing.json()["field"] == "body.messages.0.role"
        control = http.post(
            f"/v1/apps/{APP}/users/a%07b/conversations/c/messages",
            json={"messages": [{"role": "user", "content": "x"}]},
        )
        assert control.status_code == 422 and control.json()["error"] == "InvalidIdError"
        assert http.get("/healthz").json() == {"status": "ok"} and http.get("/readyz").status_code == 200
        assert "memray_http_requests_total" in http.get("/metrics").text
        assert http.get("/openapi.json").json()["info"]["title"] == "memray" and http.get("/docs").status_code == 200
