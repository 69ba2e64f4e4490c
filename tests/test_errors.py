import pickle

import pytest

import memray.errors as errors
from memray.errors import ConflictError, MissingExtraError, UnavailableError, ValidationError

SAMPLES = [
    errors.MemrayError("boom"),
    ValidationError("user_id", "", "must not be empty", "pass an id"),
    errors.InvalidIdError("app", "a\x00", "contains a control character"),
    errors.NotFoundError("no conversation c1"),
    ConflictError("stale", expected=1, actual=2),
    errors.EmbeddingError("server down"),
    errors.ModelMismatchError("dim 3 != 4; re-embed"),
    errors.StoreError("disk full"),
    errors.DeadLetterError([("app", "u1", "c1", "m1", 3, "rejected", "ValidationError: created_at")]),
    UnavailableError("shard 3", "actor died"),
    MissingExtraError("sentence-transformers", "local"),
    errors.ClosedError("closed"),
    errors.SummaryError("chat endpoint down"),
    errors.Backpressure(2, 10_500, 10_000, 60.0),
]


def test_every_error_class_has_a_sample():
    classes = {v for v in (getattr(errors, name) for name in errors.__all__) if isinstance(v, type)}
    assert classes == {type(e) for e in SAMPLES}


def test_a_missing_value_shows_as_missing_and_pickles_as_itself():
    err = ValidationError("message.role", errors.MISSING, "is required", "give role")
    assert str(err) == "invalid message.role=<missing>: is required; give role"
    back = pickle.loads(pickle.dumps(err))
    assert back.value is errors.MISSING and back.hint == "give role"


def test_closed_error_says_how_to_reopen_by_default():
    assert "memray.open(" in str(errors.ClosedError())
    assert pickle.loads(pickle.dumps(errors.ClosedError())).args == errors.ClosedError().args


@pytest.mark.parametrize("err", SAMPLES, ids=lambda e: type(e).__name__)
def test_errors_pickle_with_message_and_fields(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)
    assert back.__dict__ == err.__dict__
    assert isinstance(back, errors.MemrayError)


def test_messages_say_what_and_what_next():
    err = ValidationError("limit", -1, "must be non-negative", "pass 0 or more")
    assert str(err) == "invalid limit=-1: must be non-negative; pass 0 or more"
    assert "pip install 'memray-agents[local]'" in str(MissingExtraError("sentence-transformers", "local"))
    assert str(UnavailableError("shard 3", "actor died")) == "shard 3 unavailable: actor died"
