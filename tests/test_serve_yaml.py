"""serve.yaml validates offline: Ray Serve's own schema, memray's builder arguments, and the
application it builds — beside cluster.yaml, whose store resource and data path it must match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]


def load(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / name).read_text()))


def test_serve_yaml_is_a_valid_serve_config_for_memray() -> None:
    from ray.serve.schema import ServeDeploySchema

    config = load("serve.yaml")
    schema = ServeDeploySchema.model_validate(config)
    (app,) = schema.applications
    assert app.import_path == "memray.server.deployment:build" and app.route_prefix == "/"
    from memray.server.deployment import ServeArgs, build

    args = ServeArgs.model_validate(app.args)
    settings = args.settings()
    assert settings.config.mode == "ray" and settings.config.address == "auto" and settings.auth
    bound = build(app.args)  # the bound application Serve would deploy
    assert bound is not None


def test_serve_yaml_matches_the_cluster() -> None:
    serve, cluster = load("serve.yaml"), load("cluster.yaml")
    args = serve["applications"][0]["args"]
    head = cluster["available_node_types"][cluster["head_node_type"]]
    assert args["store_resource"] in head["resources"]
    store_nodes = sum(
        int(t.get("min_workers", 0)) for t in cluster["available_node_types"].values()
        if args["store_resource"] in t.get("resources", {})
    ) + 1  # fmt: skip
    assert args["stores"] <= store_nodes
    assert "/data/memray" in (ROOT / "cluster.yaml").read_text() and args["path"] == "/data/memray"


def test_unknown_args_are_refused() -> None:
    import pydantic

    from memray.server.deployment import ServeArgs

    with pytest.raises(pydantic.ValidationError, match="replica"):
        ServeArgs.model_validate({"path": "/data/memray", "replica": 2})


def test_auth_false_is_refused_in_a_serve_config() -> None:
    import pydantic

    from memray.server.deployment import ServeArgs

    with pytest.raises(pydantic.ValidationError, match="auth: false is refused"):
        ServeArgs.model_validate({"path": "/data/memray", "auth": False})
