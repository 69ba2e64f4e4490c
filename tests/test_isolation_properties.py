"""Property tests (Hypothesis): whatever the ids — crafted collisions ("a:b" + "c" vs "a" + "b:c"),
prefixes (u1 / u10), glob and regex characters, CJK, the longest valid ids — nothing of one
(app, user) is ever seen from another, in both modes: history, search (lexical, vector, hybrid,
user-wide), conversation lists, long-term entries, export partitions, and erasure.

Every message and entry carries its owner in its metadata, so a check holds across examples on
one shared memray: whatever a read returns for (app, user) must be owned by (app, user)."""

from __future__ import annotations

import itertools
import urllib.parse
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memray
from memray.ids import MAX_ID_CHARS, ConversationKey, encode_key, stable_hash
from memray.store.export import app_key

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]
EXAMPLES = {"inprocess": 25, "ray": 8}

CRAFTED = [
    "a",
    "b",
    "c",
    "a:b",
    "b:c",
    "ab",
    "u1",
    "u10",
    "u1*",
    "u?",
    "*",
    "%",
    "_",
    "[u]",
    ".*",
    "^u1$",
    "u1|u10",
    "a/b",
    "a b",
    "~",
    "'",
    '"',
    "\\",
    "日本",
    "日",
    "本",
    "😀",
    "default",
    "a" * MAX_ID_CHARS,
    "日" * MAX_ID_CHARS,
    "1:a",
    "2:ab",
]
ID_TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=MAX_ID_CHARS)
IDS = st.one_of(st.sampled_from(CRAFTED), ID_TEXT)


@st.composite
def two_scopes(draw: st.DrawFn) -> tuple[tuple[str, str], tuple[str, str]]:
    """Two different (app, user) pairs, often built to collide when naively concatenated."""
    if draw(st.booleans()):
        s = draw(st.text(st.sampled_from("ab:1u日*?."), min_size=2, max_size=12))
        i, j = draw(st.integers(1, len(s) - 1)), draw(st.integers(1, len(s) - 1))
        if i != j:
            return (s[:i], s[i:]), (s[:j], s[j:])
    a = (draw(IDS), draw(IDS))
    b = draw(IDS.map(lambda x: (a[0], x)) | IDS.map(lambda x: (x, a[1])) | st.tuples(IDS, IDS))
    return a, b if b != a else (a[0], a[1][:-1] + ("2" if a[1].endswith("1") else "1"))


@given(two_scopes())
def test_keys_hashes_and_export_folders_of_different_scopes_differ(scopes) -> None:
    (a_app, a_user), (b_app, b_user) = scopes
    assert encode_key(a_app, a_user) != encode_key(b_app, b_user)
    assert ConversationKey.of(a_app, a_user, "c") != ConversationKey.of(b_app, b_user, "c")
    if a_app != b_app:
        assert app_key(a_app) != app_key(b_app)
        assert len(("app_key=" + urllib.parse.quote(app_key(a_app), safe="")).encode()) <= 255
    if (a_app, a_user) != (b_app, b_user):
        assert stable_hash(a_app, a_user) != stable_hash(b_app, b_user)


@pytest.fixture(scope="module", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    m = memray.open(
        config=memray.MemoryConfig(
            path=str(tmp_path_factory.mktemp(f"iso-{request.param}")),
            mode=request.param,
            hosts=2,
            shards=2,
            debounce_ms=10,
        )
    )
    yield m
    m.close(terminate=True)


_counter = itertools.count()


def owned(items: list[dict[str, object]], owner: list[str]) -> bool:
    return all(meta.get("owner") == owner for meta in items)


def test_nothing_crosses_an_app_user_boundary(mem: memray.Memory) -> None:
    written: dict[tuple[str, str], set[str]] = {}

    @settings(
        max_examples=EXAMPLES[mem.config.mode],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(scopes=two_scopes(), erase=st.booleans())
    def check(scopes: tuple[tuple[str, str], tuple[str, str]], erase: bool) -> None:
        n = next(_counter)
        secrets = {}
        for app, user in scopes:
            secret = f"zebra{n}{uuid.uuid4().hex[:6]}"
            secrets[(app, user)] = secret
            conv_id = f"c{n}"
            conv = mem.conversation(user_id=user, conversation_id=conv_id, app=app)
            conv.add({"role": "user", "content": f"the code word is {secret}", "metadata": {"owner": [app, user]}})
            mem.memory_service.add_entry(app, user, {"content": f"entry {secret}", "metadata": {"owner": [app, user]}})
            written.setdefault((app, user), set()).add(conv_id)
        assert mem.wait_indexed(60)
        for (app, user), (other_app, other_user) in itertools.permutations(scopes):
            conv = mem.conversation(user_id=user, conversation_id=f"c{n}", app=app)
            assert owned([m.metadata for m in conv.messages()], [app, user])
            theirs = secrets[(other_app, other_user)]
            for mode in ("lexical", "vector", "hybrid"):
                for scope in ("conversation", "user"):
                    hits = conv.search(f"the code word is {theirs}", limit=10, mode=mode, scope=scope)
                    assert not hits.degraded
                    assert owned([h.message.metadata for h in hits], [app, user]), (mode, scope)
            listed = {c.conversation_id for c in mem.list_conversations(user, app=app, limit=10_000)}
            assert listed <= written[(app, user)]
            found = mem.memory_service.search(memray.SearchRequest(query=f"entry {theirs}", user_id=user, app_name=app))
            assert owned([m.entry.metadata for m in found.memories], [app, user])
            assert owned([m.entry.metadata for m in mem.memory_service.list_recent(app, user, limit=1000)], [app, user])
        if erase:
            (app, user), other = scopes
            mem.delete_user(app=app, user_id=user)
            written.pop((app, user), None)
            assert mem.verify_deleted(app=app, user_id=user).clean
            survivor = mem.conversation(user_id=other[1], conversation_id=f"c{n}", app=other[0])
            assert [m.text for m in survivor.messages()][-1] == f"the code word is {secrets[other]}"

    check()
