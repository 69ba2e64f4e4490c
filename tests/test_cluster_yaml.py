"""cluster.yaml validates offline with Ray's own checks, in its AWS form and its on-prem variant."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

CLUSTER = Path(__file__).resolve().parents[1] / "cluster.yaml"


def validated(config: dict[str, Any]) -> dict[str, Any]:
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return dict(prepared)


def onprem_variant(text: str) -> dict[str, Any]:
    """The commented `provider: type: local` block at the end of the file, uncommented."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# provider:"))
    block = []
    for line in lines[start:]:
        if not line.startswith("# ") or line.startswith("# and remove"):
            break
        block.append(line[2:])
    return dict(yaml.safe_load("\n".join(block)))


def test_aws_config_validates_and_pins_the_store_to_the_head() -> None:
    config = yaml.safe_load(CLUSTER.read_text())
    prepared = validated(config)
    head = prepared["available_node_types"][prepared["head_node_type"]]
    assert head["resources"] == {"memray_store": 1}
    # three store nodes, one history partition each (MemoryConfig(stores=3, store_resource=...))
    stores = prepared["available_node_types"]["store_worker"]
    assert stores["resources"] == {"memray_store": 1} and stores["min_workers"] == stores["max_workers"] == 2
    assert any("memray-agents" in c for c in prepared["setup_commands"])
    assert all(
        "RAY_AUTH_MODE=token" in c
        for c in prepared["head_start_ray_commands"] + prepared["worker_start_ray_commands"]
        if "ray start" in c
    )
    assert "~/.ray/auth_token" in prepared["file_mounts"]


def test_onprem_variant_validates() -> None:
    text = CLUSTER.read_text()
    config = yaml.safe_load(text)
    variant = onprem_variant(text)
    assert variant["provider"]["type"] == "local"
    config.update(variant)
    for key in ("available_node_types", "head_node_type"):
        config.pop(key)
    validated(config)


def test_unknown_keys_are_rejected_so_the_check_can_fail() -> None:
    config = yaml.safe_load(CLUSTER.read_text())
    config["not_a_ray_key"] = 1
    with pytest.raises(Exception, match="'not_a_ray_key' was unexpected"):  # jsonschema's error, via Ray
        validated(config)
