"""A module path users may have imported from that moved still works, with a
DeprecationWarning that names the new path; the new paths hold the very same objects."""

from __future__ import annotations

import importlib
import re

import pytest

import memray
import memray.ranking

#: What memray.scoring exported before it was split into memray.ranking and memray.sim_time.
SCORING_NAMES = [
    "SimTime",
    "Scoring",
    "Stream",
    "Window",
    "to_seconds",
    "check_importance",
    "window",
    "coerce_scoring",
    "stream_of",
    "SECONDS_PER_HOUR",
]


@pytest.mark.parametrize("name", SCORING_NAMES)
def test_an_old_name_gives_the_same_object_and_names_its_new_module(name: str) -> None:
    old = importlib.import_module("memray.scoring")
    with pytest.warns(DeprecationWarning, match=rf"memray\.scoring is deprecated: import {name} from ") as caught:
        found = getattr(old, name)
    new = re.search(r"from (memray\.\w+)$", str(caught[0].message))
    assert new is not None and new.group(1) in ("memray.ranking", "memray.sim_time")
    assert found is getattr(importlib.import_module(new.group(1)), name)


def test_a_from_import_of_an_old_path_warns_at_the_callers_line() -> None:
    with pytest.warns(DeprecationWarning, match="memray.ranking") as caught:
        from memray.scoring import Scoring
    assert Scoring is memray.Scoring is memray.ranking.Scoring
    assert caught[0].filename == __file__  # stacklevel: the warning points at the import


def test_a_name_that_never_was_there_is_an_attribute_error() -> None:
    import memray.scoring

    with pytest.raises(AttributeError, match="Nothing"):
        memray.scoring.Nothing  # noqa: B018
    assert sorted(dir(memray.scoring)) == sorted(SCORING_NAMES)
