import pytest

from memray.errors import InvalidIdError
from memray.ids import ConversationKey, encode_key, stable_hash, validate_id, validate_project_id


@pytest.mark.parametrize("bad", ["", "x" * 257, "a\x00b", "tab\there", "nl\n", "\x7f", 5, None])
def test_invalid_ids_are_rejected_with_the_field_named(bad):
    with pytest.raises(InvalidIdError) as err:
        validate_id("user_id", bad)
    assert "user_id" in str(err.value)
    assert err.value.field == "user_id"


def test_limits_count_characters_not_bytes():
    assert validate_project_id("日" * 256) == "日" * 256
    with pytest.raises(InvalidIdError):
        validate_project_id("日" * 257)
    assert validate_project_id("p" * 256)
    with pytest.raises(InvalidIdError):
        validate_project_id("")


def test_keys_are_collision_free():
    assert encode_key("a:b", "c") != encode_key("a", "b:c")
    assert encode_key("ab", "c") != encode_key("a", "bc")
    assert stable_hash("ab", "c") != stable_hash("a", "bc")


def test_route_is_stable_and_in_range():
    key = ConversationKey.of("app", "u1", "c1")
    assert 0 <= key.route(4) < 4
    assert key.route(4) == ConversationKey.of("app", "u1", "c1").route(4)
