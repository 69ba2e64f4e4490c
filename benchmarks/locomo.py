"""LoCoMo (Maharana et al., 2024: "Evaluating Very Long-Term Conversational Memory of LLM
Agents"), a public long-conversation benchmark memray did not generate, as retrieval records.

Ten conversations between two people, 19-32 sessions each (5,882 turns), and 1,986 questions
whose evidence turns are annotated (``"D3:12"``: session 3, turn 12). The data file is
``data/locomo10.json`` of https://github.com/snap-research/locomo (CC BY-NC 4.0, so it is not
redistributed here): download it once and pass its path (``--locomo PATH``, or the
``MEMRAY_LOCOMO`` variable; ``benchmarks/data/locomo10.json`` is also looked at, and is git-ignored)::

    curl -L -o benchmarks/data/locomo10.json \\
        https://raw.githubusercontent.com/snap-research/locomo/main/data/locomo10.json

Records have the shape of :mod:`benchmarks.retrieval_data`: one "user" per conversation, one
memray conversation per session, a turn's text ``"<speaker>: <text>"`` (plus ``" [shares a
photo: <caption>]"`` for a shared image, the caption the dataset gives), and a question's
``evidence`` the ids of its evidence turns. The 9 evidence references that name no turn are
dropped, and the 9 questions left without evidence are skipped (1,977 questions remain).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["SHA256", "find", "load"]

#: sha256 of data/locomo10.json at snap-research/locomo 3eb6f2c (the file the numbers are for).
SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
_LOCAL = Path(__file__).parent / "data" / "locomo10.json"


def find(path: str | None) -> Path:
    """The LoCoMo file: ``path``, else ``$MEMRAY_LOCOMO``, else ``benchmarks/data/locomo10.json``."""
    for candidate in (path, os.environ.get("MEMRAY_LOCOMO"), str(_LOCAL)):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise SystemExit(
        "LoCoMo not found: download data/locomo10.json from https://github.com/snap-research/locomo "
        "and pass --locomo PATH (see benchmarks/locomo.py)"
    )


def load(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """(records, a warning if the file is not the one docs/benchmarks.md's numbers are for)."""
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    warning = None if digest == SHA256 else f"{path} has sha256 {digest}, not {SHA256}: numbers may differ"
    records: list[dict[str, Any]] = []
    for sample in json.loads(raw):
        user = str(sample["sample_id"])
        conv = sample["conversation"]
        sessions = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        ids: set[str] = set()
        for session in sessions:
            for n, turn in enumerate(conv[session]):
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                tid = f"{user}:{turn['dia_id']}"
                ids.add(tid)
                records.append(
                    {
                        "type": "turn",
                        "user": user,
                        "session": session,
                        "turn": n,
                        "id": tid,
                        "role": "user" if turn["speaker"] == conv["speaker_a"] else "assistant",
                        "text": text,
                    }
                )
        for n, qa in enumerate(sample["qa"]):
            evidence = [e for e in (f"{user}:{d}" for d in qa.get("evidence", [])) if e in ids]
            if evidence:
                records.append(
                    {
                        "type": "question",
                        "id": f"{user}:q{n}",
                        "user": user,
                        "question": qa["question"],
                        "evidence": evidence,
                        "category": str(qa["category"]),
                        "style": f"cat{qa['category']}",
                    }
                )
    return records, warning
