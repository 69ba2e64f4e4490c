"""memray's paraphrase set as retrieval records: facts asked about in other words, and questions
about what was never said.

``data/paraphrase.json`` was written by hand for memray (not generated): 144 personal facts as a
user states them in a chat ("I drive a red Tesla Model 3") and a later question about each that
shares no content word with it ("what car do I own?"; no word of 3+ letters in common after
stemming, function words aside), across health, work, family, home, preferences, events, plans,
travel, hobbies, finance and education; 76 personal questions that no fact answers; 128 turns of
topic-free small talk.

Records have the shape of :mod:`benchmarks.retrieval_data`. Each fact sits in its own
conversation of 12 messages (11 filler turns drawn with a fixed seed, the fact at a random
place), 12 conversations to a user, all in one app, so the same questions can be asked at three
scopes: the fact's conversation (12 messages), its user's (144) and the app's (1,728). An
unrelated question is asked in a conversation of its own user. ``split`` is ``"tune"`` for even
ids and ``"test"`` for odd ones: fusion is tuned on one half and reported on the other.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

__all__ = ["PATH", "load"]

PATH = Path(__file__).parent / "data" / "paraphrase.json"
PER_USER = 12
TURNS = 12


def load(path: Path = PATH, seed: int = 0) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    rng = random.Random(seed)
    filler = data["filler"]
    records: list[dict[str, Any]] = []
    for n, pair in enumerate(data["pairs"]):
        user, session = f"p-user{n // PER_USER}", f"p-{pair['id']}"
        turns = [dict(t) for t in rng.sample(filler, TURNS - 1)]
        at = rng.randrange(TURNS)
        turns.insert(at, {"role": "user", "content": pair["fact"]})
        for i, t in enumerate(turns):
            records.append(
                {
                    "type": "turn",
                    "user": user,
                    "session": session,
                    "turn": i,
                    "id": f"{session}:{i}",
                    "role": t["role"],
                    "text": t["content"],
                }
            )
        records.append(
            {
                "type": "question",
                "id": pair["id"],
                "user": user,
                "session": session,
                "question": pair["question"],
                "evidence": [f"{session}:{at}"],
                "category": pair["category"],
                "style": "paraphrase",
                "split": "tune" if n % 2 == 0 else "test",
            }
        )
    users = len(data["pairs"]) // PER_USER
    for n, unrelated in enumerate(data["unrelated"]):
        pair = data["pairs"][(n * 7) % len(data["pairs"])]
        records.append(
            {
                "type": "unrelated",
                "id": unrelated["id"],
                "user": f"p-user{((n * 7) % len(data['pairs'])) // PER_USER % users}",
                "session": f"p-{pair['id']}",
                "question": unrelated["question"],
                "split": "tune" if n % 2 == 0 else "test",
            }
        )
    return records
