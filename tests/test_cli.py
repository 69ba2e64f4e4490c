"""The ``memray`` command: version, help that gives every default, the demo, stats, errors."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import memray
from memray.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "memray.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def parsers(parser: argparse.ArgumentParser, name: str = "memray") -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                out += parsers(child, f"{name} {sub}")
    return out


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"memray {memray.__version__} (memray-agents)"


@pytest.mark.parametrize("name,parser", parsers(build_parser()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_option_has_help_that_gives_its_default(name, parser):
    for action in parser._actions:
        if not action.option_strings or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        if action.help == argparse.SUPPRESS:  # not shown by --help (a deprecated spelling)
            continue
        assert action.help, f"{name} {action.option_strings[0]} has no help text"
        shown = parser._get_formatter()._get_help_string(action) or ""  # what --help prints for it
        assert re.search(r"default|required", shown), f"{name} {action.option_strings[0]}: {shown!r} gives no default"


@pytest.mark.parametrize("name,parser", parsers(build_parser()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_says_what_it_does_in_its_help(name, parser):
    assert parser.description, f"`{name} --help` has no description"


def test_every_mode_option_defaults_to_ray_as_memray_open_does():
    """Except ``memray fork``'s, which follows SRC: ray when a memray runs on it, else in process
    (:func:`memray.cli.fork_mode`, tested in tests/test_fork.py)."""
    modes = [(n, a.default) for n, p in parsers(build_parser()) for a in p._actions if "--mode" in a.option_strings]
    assert ("memray fork", None) in modes, modes
    others = [default for name, default in modes if name != "memray fork"]
    assert others and all(default == "ray" for default in others), modes


@pytest.fixture(scope="module")
def mistakes(tmp_path_factory) -> dict[str, str]:
    """Paths that are not a memray data directory, and one that is."""
    root = tmp_path_factory.mktemp("mistakes")
    (root / "notes.txt").write_text("not a directory")
    (root / "empty").mkdir()
    memray.open(str(root / "data"), mode="inprocess", hosts=1, shards=1).close()
    return {
        "file": str(root / "notes.txt"),
        "missing": str(root / "missing"),
        "empty": str(root / "empty"),
        "data": str(root / "data"),
        "root": str(root),
    }


PATH_MISTAKES = [
    ("stats", ["stats", "{bad}"]),
    ("fork", ["fork", "{bad}", "{root}/fork-dst", "--mode", "inprocess"]),
    ("backfill", ["backfill", "summaries", "{bad}"]),
    ("backfill", ["backfill", "embeddings", "{bad}", "--model", "hash:8"]),
]


@pytest.mark.parametrize("bad", ["file", "missing", "empty"])
@pytest.mark.parametrize("command,argv", PATH_MISTAKES, ids=[" ".join(a[:2]) for _, a in PATH_MISTAKES])
def test_every_path_mistake_is_one_line_naming_the_path(mistakes, command, argv, bad):
    out = run_cli(*[a.format(bad=mistakes[bad], root=mistakes["root"]) for a in argv])
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    line = out.stderr.strip()
    assert "\n" not in line and line.startswith(f"memray {command}: error: invalid path="), line
    assert mistakes[bad] in line and "give the data directory" in line


@pytest.mark.parametrize(
    "argv,says",
    [
        (["demo", "{file}", "--agents", "1", "--turns", "1", "--mode", "inprocess"], "is a file, not a directory"),
        (["fork", "{data}", "{file}", "--mode", "inprocess"], "already exists and is not an empty folder"),
    ],
    ids=["demo into a file", "fork onto a file"],
)
def test_a_file_where_a_directory_goes_is_one_line(mistakes, argv, says):
    out = run_cli(*[a.format(**mistakes) for a in argv])
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.stderr.strip().splitlines()[-1].startswith("memray ") and says in out.stderr


def test_the_data_directory_is_the_first_argument_and_path_still_works(mistakes):
    first = run_cli("stats", mistakes["data"], "--json")
    old = run_cli("stats", "--path", mistakes["data"], "--json")
    assert first.returncode == old.returncode == 0, old.stderr
    assert json.loads(first.stdout)["tables"] == json.loads(old.stdout)["tables"]
    assert first.stderr == "" and "--path is deprecated; give the data directory as the first argument" in old.stderr


def test_demo_help_shows_the_values():
    text = build_parser()._subparsers._group_actions[0].choices["demo"].format_help()  # type: ignore[union-attr]
    assert "(default: 1000)" in text and "(default: ray)" in text and "removed at the end" in text


@pytest.mark.long
def test_the_readme_demo_is_quiet_and_cleans_up_after_itself(tmp_path):
    """The README's first command (at a small size), in ray mode with its own Ray: stdout has the
    two result lines (and the JSON report with ``--json``), stderr only memray's own phase lines
    — no Ray warning or error, no escape codes (stderr is not a terminal here, so no bar either)
    — and the data folder goes."""
    out = run_cli("demo", "--agents", "20", "--turns", "4", "--hosts", "2", "--num-cpus", "2", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 3, out.stdout
    assert (
        lines[0].startswith("memray demo: 20 agents, 4 turns, mode=ray, data in ") and "removed at the end" in lines[0]
    )
    assert "verification PASSED" in lines[1] and "questions about facts outside the 4 recent messages" in lines[1]
    report = json.loads(lines[2])
    assert report["verified"] and report["recall_questions"] == 20
    assert out.stderr.strip(), "the demo says what it is doing on stderr"
    for line in out.stderr.splitlines():
        assert re.match(r"\[ *\d+\.\ds\] memray: ", line), f"not a memray line: {line!r}"
    assert "\x1b" not in out.stdout + out.stderr
    data = re.search(r"data in (\S+) \(a temporary folder", lines[0])
    assert data and not os.path.exists(data.group(1))  # the temporary data folder was removed


def test_demo_with_few_turns_says_recall_was_not_measured(tmp_path):
    out = run_cli("demo", str(tmp_path / "d"), "--agents", "5", "--turns", "2", "--mode", "inprocess")
    assert out.returncode == 0, out.stderr
    assert "recall not measured (questions start at turn 3: use --turns 4 or more)" in out.stdout
    assert len(out.stdout.splitlines()) == 2  # the summary only: no JSON without --json
    assert (tmp_path / "d" / "history.duckdb").exists()  # a PATH given keeps the data


def test_stats_reads_a_data_directory(tmp_path):
    path = tmp_path / "data"
    with memray.open(str(path), mode="inprocess", hosts=1, shards=2) as mem:
        for c in range(3):
            mem.conversation(user_id=f"u{c}", conversation_id="c").add(
                [{"role": "user", "content": f"hello {i}"} for i in range(4)], durable=True
            )
        mem.memory_service.add_entry("default", "u0", "likes tea")
    out = run_cli("stats", str(path), "--json", "--hosts", "3")
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout)
    assert (
        stats["tables"]["conversations"] == 3 and stats["tables"]["messages"] == 12 and stats["tables"]["entries"] == 1
    )
    assert [s["shard"] for s in stats["shards"]] == [0, 1]
    assert sum(s["items"] for s in stats["shards"]) == 13  # 12 messages + 1 entry, snapshotted at close
    assert stats["hosts"] == {"count": 3, "conversations": stats["hosts"]["conversations"]}
    assert sum(stats["hosts"]["conversations"]) == 3
    assert stats["disk_bytes"]["history.duckdb"] > 0 and stats["disk_bytes"]["vectors"] > 0
    text = run_cli("stats", str(path)).stdout
    assert "rows per table:" in text and "messages" in text and "disk use:" in text and "total" in text


def test_stats_errors_say_what_to_do(tmp_path):
    out = run_cli("stats", str(tmp_path / "nothing"))
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"memray stats: error: invalid path={str(tmp_path / 'nothing')!r}: does not exist; "
        "give the data directory of a memray (the path memray.open was given)"
    )
    with memray.open(str(tmp_path / "busy"), mode="inprocess", hosts=1, shards=1):
        out = run_cli("stats", str(tmp_path / "busy"))
    assert out.returncode == 2
    assert "another process (a memray in one process, or a job) has it open" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_bad_option_value_is_one_line_not_a_traceback(tmp_path):
    out = run_cli("demo", str(tmp_path), "--agents", "5", "--turns", "1", "--mode", "inprocess", "--hosts", "0")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == (
        "memray demo: error: invalid hosts=0: must be greater than 0; "
        "see memray.MemoryConfig for what each option takes"
    )
    assert "Traceback" not in out.stderr
