"""The ``memray serve``, ``memray mcp`` and ``memray keys`` commands (parsers and what they run).

Nothing here imports the server's packages before :func:`memray.server.require` has checked
they are installed: without the ``serve`` extra each command says so in one line.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import sys
from typing import Any

import memray
from memray.cli_args import DefaultsHelpFormatter, add_data_dir
from memray.config import MemoryConfig
from memray.errors import ValidationError
from memray.runtime.join import running_memray
from memray.server import require
from memray.server.settings import ServerSettings

__all__ = ["add_parsers", "is_loopback"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _config(args: argparse.Namespace, mode: str = "ray") -> MemoryConfig:
    return MemoryConfig(
        path=args.path,
        mode=mode,
        address=args.address,
        hosts=getattr(args, "hosts", 2),
        shards=getattr(args, "shards", 1),
        num_cpus=getattr(args, "num_cpus", None),
        verbose=getattr(args, "verbose", False),
    )


def _serve(args: argparse.Namespace) -> int:
    require()
    if args.no_auth and not is_loopback(args.host):
        raise ValidationError(
            "--no-auth", args.host, "is allowed on a loopback host only", "bind --host 127.0.0.1, or use keys"
        )
    from memray.server.deployment import serve_forever  # Ray Serve: 690 ms, paid by `memray serve` alone

    origins = tuple(args.allow_origin) or ServerSettings.allowed_origins
    hosts = tuple(args.allow_host) or ServerSettings.allowed_hosts
    if args.host not in ("0.0.0.0", "::", "") and args.host not in hosts:  # the address it listens on
        hosts += (f"[{args.host}]" if ":" in args.host else args.host,)
    settings = ServerSettings(
        config=_config(args),
        replicas=args.replicas,
        auth=not args.no_auth,
        max_body_bytes=args.max_body_bytes,
        allowed_origins=origins,
        allowed_hosts=hosts,
        request_timeout_s=args.request_timeout_s,
        max_requests_per_key=args.max_requests_per_key,
        key_ring_stale_s=args.key_ring_stale_s,
        max_ongoing_requests=args.max_ongoing_requests,
        max_queued_requests=args.max_queued_requests,
        otlp_endpoint=args.otlp_endpoint,
        mcp_app=args.app,
    )
    return serve_forever(settings, args.host, args.port)


def _mcp(args: argparse.Namespace) -> int:
    require()

    from memray.server.mcp import mcp_server  # the MCP SDK: 520 ms, paid by `memray mcp` alone

    with _open_here_or_join(args) as mem:
        asyncio.run(mcp_server(mem, None, args.app).run_stdio_async())
    return 0


def _open_here_or_join(args: argparse.Namespace) -> Any:
    """The memray of PATH: the running one if a server (any ray-mode memray) holds the
    directory — joined with no address typed (:mod:`memray.runtime.join`) — or ``--address``'s;
    else the directory opened here, in-process (no Ray started for a key or a desktop client)."""
    config = _config(args, "inprocess").model_copy(update={"hosts": 1})
    if args.address or running_memray(config) is not None:
        config = config.model_copy(update={"mode": "ray"})
    return memray.open(config=config)


def _keys(args: argparse.Namespace) -> int:
    with _open_here_or_join(args) as mem:
        if args.action == "create":
            key, record = mem.keys.create(args.app, args.user, args.read_only, args.label)
            scope = f"app {record.app!r}" + (f", user {record.user_id!r}" if record.user_id else ", every user")
            print(f"key {record.key_id} for {scope}{', read-only' if record.read_only else ''} (shown once):")
            print(key)
        elif args.action == "list":
            for r in mem.keys.list(args.app):
                row = {k: v for k, v in r._asdict().items() if k != "digest"}
                print(json.dumps(row) if args.json else _key_line(row))
        else:
            record, unconfirmed = mem.keys.revoke(args.key_id)
            print(f"revoked {record.key_id} (app {record.app!r})")
            if unconfirmed:
                print(
                    f"not confirmed within 5 s by {len(unconfirmed)} replica(s): {', '.join(unconfirmed)}; each "
                    "refuses every key once it has not heard from the key ring for --key-ring-stale-s",
                    file=sys.stderr,
                )
    return 0


def _key_line(row: dict[str, Any]) -> str:
    state = "revoked" if row["revoked_at"] else "live"
    user = row["user_id"] or "*"
    mode = "read-only" if row["read_only"] else "read-write"
    return f"{row['key_id']}  {state:7}  app={row['app']}  user={user}  {mode}  {row['label'] or ''}".rstrip()


def add_parsers(sub: Any) -> None:
    """``serve``, ``mcp`` and ``keys`` under the ``memray`` command, each taking its PATH as every
    memray command does (:func:`memray.cli_args.add_data_dir`)."""
    serve = sub.add_parser(
        "serve",
        help="serve memray over HTTP: REST under /v1, MCP at /mcp (Ray Serve)",
        formatter_class=DefaultsHelpFormatter,
        description="Opens the memray at PATH (a local Ray, or --address), and serves it on Ray Serve. "
        "Every route but /healthz and /readyz needs a key (memray keys create). Ctrl-C stops it.",
    )
    _common(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on")
    serve.add_argument("--replicas", type=int, default=1, help="Serve replicas (HTTP side; the actors are shared)")
    serve.add_argument("--hosts", type=int, default=2, help="ConversationHost actors")
    serve.add_argument("--shards", type=int, default=1, help="VectorShard actors")
    serve.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: this machine's)")
    serve.add_argument("--no-auth", action="store_true", help="serve without keys (only on a loopback --host)")
    serve.add_argument(
        "--max-body-bytes", type=int, default=ServerSettings.max_body_bytes, help="larger request bodies get 413"
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        help="an Origin MCP accepts (repeatable; a trailing port is allowed) (default: the loopback origins)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        help="a Host name /mcp answers (and every route with --no-auth) (repeatable; any port) "
        "(default: the loopback names and --host)",
    )
    serve.add_argument(
        "--request-timeout-s",
        type=float,
        default=ServerSettings.request_timeout_s,
        help="each request's deadline in the replica (then 504)",
    )
    serve.add_argument(
        "--max-requests-per-key",
        type=int,
        default=ServerSettings.max_requests_per_key,
        help="one key's requests in flight per replica (then 429)",
    )
    serve.add_argument(
        "--key-ring-stale-s",
        type=float,
        default=ServerSettings.key_ring_stale_s,
        help="a replica not hearing from the key ring for this long accepts no key (503)",
    )
    serve.add_argument(
        "--max-ongoing-requests",
        type=int,
        default=ServerSettings.max_ongoing_requests,
        help="requests one replica runs at once (Serve's)",
    )
    serve.add_argument(
        "--max-queued-requests",
        type=int,
        default=ServerSettings.max_queued_requests,
        help="requests waiting for a replica (then Serve's 503)",
    )
    serve.add_argument(
        "--otlp-endpoint",
        default=None,
        help="export traces over OTLP/HTTP here (default: OTEL_EXPORTER_OTLP_ENDPOINT if set; else no tracing)",
    )
    serve.add_argument("--app", default="default", help="the app MCP tools act on with --no-auth")
    serve.add_argument("--verbose", action="store_true", help="show Ray's own log lines")
    serve.set_defaults(func=_serve)

    mcp = sub.add_parser(
        "mcp",
        help="MCP over stdio, for desktop clients",
        formatter_class=DefaultsHelpFormatter,
        description="Runs memray's MCP tools over stdin/stdout for one local client (no keys: the "
        "client runs this process as you). In-process unless --address joins a running memray.",
    )
    _common(mcp)
    mcp.add_argument("--app", default="default", help="the app the tools act on")
    mcp.set_defaults(func=_mcp)

    keys = sub.add_parser(
        "keys",
        help="API keys of memray serve: create, list, revoke",
        formatter_class=DefaultsHelpFormatter,
        description="The keys memray serve checks on every request, each bound to one app (optionally one "
        "user, optionally read-only); the store keeps their digests. Joins the memray running on PATH, if one is.",
    )
    actions = keys.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        help="a new key; its last line of output is the key",
        formatter_class=DefaultsHelpFormatter,
        description="Create a key for --app (and --user); the key itself is printed once, as the last line.",
    )
    _common(create)
    create.add_argument("--app", required=True, help="the app the key reaches")
    create.add_argument("--user", default=None, help="bind the key to this user (default: every user of the app)")
    create.add_argument("--read-only", action="store_true", help="the key can only read")
    create.add_argument("--label", default=None, help="a note shown by list")
    listing = actions.add_parser(
        "list",
        help="every key, revoked ones too",
        formatter_class=DefaultsHelpFormatter,
        description="Every key's id, state, app, user, mode and label (never the key).",
    )
    _common(listing)
    listing.add_argument("--app", default=None, help="only this app's keys (default: every app's)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    revoke = actions.add_parser(
        "revoke",
        help="revoke a key (refused at once)",
        formatter_class=DefaultsHelpFormatter,
        description="Revoke the key KEY_ID (memray keys list shows ids): every server refuses it from then on.",
    )
    _common(revoke)
    revoke.add_argument("key_id", help="the key's id (memray keys list)")
    for parser in (create, listing, revoke):
        parser.set_defaults(func=_keys)


def _common(parser: argparse.ArgumentParser) -> None:
    add_data_dir(parser, "the data directory (default: ./memray-data)", default="./memray-data")
    parser.add_argument(
        "--address",
        default=None,
        help="the Ray cluster where memray runs (default: the one running on PATH, if any, else none)",
    )
