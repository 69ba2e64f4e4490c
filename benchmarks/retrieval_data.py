"""Generate the conversational retrieval set: multi-session chats with facts asked about later.

    python -m benchmarks.retrieval_data [--users 50 --sessions 5 --turns 20]
        [--out benchmarks/data/conversational_retrieval.jsonl]

Deterministic (seeded). Each user has ``--sessions`` conversations of ``--turns`` turns (user and
assistant alternating). A user states each of their personal facts once, in one user turn of an
early session, among small talk and *confusers*: turns that reuse a fact's topic words in another
context ("my sister called about nothing much"), so word overlap alone does not find the answer.
Questions come later and ask for the fact in other words: some name the fact's entity (``entity``:
"Where does Ingrid live now?"), some share only a topic word or a word stem (``partial``: "What
time is my dental check-up?" for "dentist appointment"), some share almost nothing
(``paraphrase``: "Which city did my sibling relocate to?"). Each question lists its evidence turn.

Lines are JSON records: ``{"type": "turn", "user", "session", "turn", "id", "role", "text"}``
then ``{"type": "question", "id", "user", "question", "evidence": [turn ids], "category",
"style"}``.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from benchmarks.retrieval_vocab import (
    ALLERGENS,
    ANIMALS,
    ASSISTANT_SMALL,
    BOOKS,
    CARS,
    CATEGORIES,
    CITIES,
    DATES,
    DIETS,
    DOCTORS,
    INSTRUMENTS,
    JOBS,
    KIDS,
    NAMES,
    PETS,
    PROJECTS,
    SCHOOLS,
    SMALL_TALK,
    TIMES,
    TRIPS,
    WEEKDAYS,
)

DEFAULT_OUT = Path(__file__).parent / "data" / "conversational_retrieval.jsonl"


def _slots(rng: random.Random) -> dict[str, str]:
    animal, color = rng.choice(ANIMALS)
    job, company = rng.choice(JOBS)
    car, carcolor = rng.choice(CARS)
    dest, month, sight = rng.choice(TRIPS)
    book, author = rng.choice(BOOKS)
    name, teacher, friend = rng.sample(NAMES, 3)
    return {
        "name": name,
        "teacher": teacher,
        "friend": friend,
        "city": rng.choice(CITIES),
        "animal": animal,
        "color": color,
        "pet": rng.choice(PETS),
        "allergen": rng.choice(ALLERGENS),
        "job": job,
        "company": company,
        "car": car,
        "carcolor": carcolor,
        "instrument": rng.choice(INSTRUMENTS),
        "dest": dest,
        "month": month,
        "sight": sight,
        "date": rng.choice(DATES),
        "diet": rng.choice(DIETS),
        "project": rng.choice(PROJECTS),
        "doc": rng.choice(DOCTORS),
        "time": rng.choice(TIMES),
        "weekday": rng.choice(WEEKDAYS),
        "book": book,
        "author": author,
        "kid": rng.choice(KIDS),
        "school": rng.choice(SCHOOLS),
    }


def generate(
    users: int = 50, sessions: int = 5, turns: int = 20, facts: int = 6, seed: int = 7
) -> list[dict[str, Any]]:
    """Every record of the set, turns first then questions (see the module docstring)."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    pairs = turns // 2
    for u in range(users):
        user = f"user-{u:03d}"
        slots = _slots(rng)
        cats = rng.sample(sorted(CATEGORIES), facts)
        # each fact lands in a random user turn of the first sessions-1 sessions; confusers anywhere
        free = [(s, p) for s in range(max(1, sessions - 1)) for p in range(pairs)]
        rng.shuffle(free)
        plan: dict[tuple[int, int], tuple[str, str]] = {}
        for cat in cats:
            plan[free.pop()] = ("fact", cat)
        confuse = [(s, p) for s in range(sessions) for p in range(pairs) if (s, p) not in plan]
        rng.shuffle(confuse)
        for cat in cats:
            for text in CATEGORIES[cat][2]:
                if confuse:
                    plan[confuse.pop()] = ("confuser", text)
        evidence: dict[str, str] = {}
        for s in range(sessions):
            for p in range(pairs):
                kind, what = plan.get((s, p), ("small", ""))
                if kind == "fact":
                    text, reply = rng.choice(CATEGORIES[what][0]).format(**slots), CATEGORIES[what][3]
                elif kind == "confuser":
                    text, reply = what, rng.choice(ASSISTANT_SMALL)
                else:
                    text, reply = rng.choice(SMALL_TALK), rng.choice(ASSISTANT_SMALL)
                for n, (role, body) in enumerate((("user", text), ("assistant", reply))):
                    tid = f"{user}-s{s}-t{2 * p + n:02d}"
                    records.append(
                        {
                            "type": "turn",
                            "user": user,
                            "session": f"s{s}",
                            "turn": 2 * p + n,
                            "id": tid,
                            "role": role,
                            "text": body,
                        }
                    )
                    if kind == "fact" and role == "user":
                        evidence[what] = tid
        for cat in cats:
            style, template = rng.choice(CATEGORIES[cat][1])
            questions.append(
                {
                    "type": "question",
                    "id": f"{user}-q-{cat}",
                    "user": user,
                    "question": template.format(**slots),
                    "evidence": [evidence[cat]],
                    "category": cat,
                    "style": style,
                }
            )
    return records + questions


def load(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The committed set (or ``path``); generated on the fly if the file is missing."""
    file = Path(path) if path else DEFAULT_OUT
    if not file.exists():
        return generate()
    with file.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--facts", type=int, default=6, help="facts (and questions) per user")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    records = generate(args.users, args.sessions, args.turns, args.facts, args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(
        json.dumps(
            {
                "out": str(out),
                "records": len(records),
                "questions": sum(r["type"] == "question" for r in records),
                "bytes": out.stat().st_size,
            }
        )
    )


if __name__ == "__main__":
    main()
