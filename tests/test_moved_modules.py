"""A module path users may have imported from that moved still works, with a
DeprecationWarning that names the new path; the new paths hold the very same objects."""

from __future__ import annotations

import importlib

import pytest

import memray
import memray.ranking
import memray.sim_time

#: old module -> {name: new module}
MOVED = {
    "memray.scoring": {
        "Scoring": "memray.ranking",
        "Stream": "memray.ranking",
        "check_importance": "memray.ranking",
        "coerce_scoring": "memray.ranking",
        "stream_of": "memray.ranking",
        "SimTime": "memray.sim_time",
        "SECONDS_PER_HOUR": "memray.sim_time",
        "to_seconds": "memray.sim_time",
        "Window": "memray.sim_time",
        "window": "memray.sim_time",
    }
}
CASES = [(old, name, new) for old, names in MOVED.items() for name, new in names.items()]


@pytest.mark.parametrize(("old", "name", "new"), CASES)
def test_an_old_path_gives_the_same_object_and_names_the_new_path(old: str, name: str, new: str) -> None:
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"import {name} from {new}\b"):
        found = getattr(module, name)
    assert found is getattr(importlib.import_module(new), name)


def test_a_from_import_of_an_old_path_warns_at_the_callers_line() -> None:
    with pytest.warns(DeprecationWarning, match="memray.ranking") as caught:
        from memray.scoring import Scoring
    assert Scoring is memray.Scoring is memray.ranking.Scoring
    assert caught[0].filename == __file__  # stacklevel: the warning points at the import


def test_a_name_that_never_was_there_is_an_attribute_error() -> None:
    import memray.scoring

    with pytest.raises(AttributeError, match="Nothing"):
        memray.scoring.Nothing  # noqa: B018
    assert sorted(dir(memray.scoring)) == sorted(MOVED["memray.scoring"])
