"""The retrieval benchmarks run at a tiny size, so they cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import locomo, retrieval_data, retrieval_eval, static_embedder, vector_recall


def test_retrieval_set_is_deterministic_and_committed_as_generated() -> None:
    small = retrieval_data.generate(users=2, sessions=3, turns=8, facts=3, seed=1)
    assert small == retrieval_data.generate(users=2, sessions=3, turns=8, facts=3, seed=1)
    turns = {r["id"]: r for r in small if r["type"] == "turn"}
    questions = [r for r in small if r["type"] == "question"]
    assert len(turns) == 2 * 3 * 8 and len(questions) == 6
    for q in questions:  # every evidence turn is a user turn of that user, stated before the last session
        ev = turns[q["evidence"][0]]
        assert ev["role"] == "user" and ev["user"] == q["user"] and ev["session"] != "s2"
    committed = retrieval_data.load()
    assert committed == retrieval_data.generate()  # the JSONL is exactly what the script writes
    assert sum(r["type"] == "question" for r in committed) == 300


@pytest.mark.long
def test_retrieval_eval_prints_one_json_line_and_plots(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "eval.png"
    argv = ["--datasets", "synthetic,paraphrase", "--users", "2", "--embedders", "static,hash", "--plot", str(png)]
    result = retrieval_eval.main([*argv, "--tune"])
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and json.loads(line) == result
    synthetic, para = result["datasets"]["synthetic"], result["datasets"]["paraphrase"]
    assert synthetic["users"] == 2 and synthetic["split"] == "test" and synthetic["questions"] == 6
    assert para["questions"] == 12 and para["unrelated"] > 0  # 24 facts of 2 users, the test half
    for emb in ("static", "hash"):
        assert result["tuning"][emb]["vector_weight"] in retrieval_eval.WEIGHTS
        run = synthetic["embedders"][emb]["calibrated"]
        for mode in retrieval_eval.MODES:
            r = run["user"][mode]
            assert 0.0 <= r["recall@1"] <= r["recall@3"] <= r["recall@5"] <= r["recall@10"] <= r["recall@15"] <= 1.0
            bm25 = synthetic["floor_bm25"]["user"]["recall@10"]
            assert run["user"]["ratio_to_bm25"][mode] == round(r["recall@10"] / bm25, 3)
        assert synthetic["embedders"][emb]["tuned"]["vector_weight"] == result["tuning"][emb]["vector_weight"]
        for scope in ("conversation", "user", "app"):
            assert 0.0 <= para["embedders"][emb]["calibrated"][scope]["hybrid"]["unrelated_any_hit"] <= 1.0
    assert 0.0 < synthetic["embedders"]["static"]["calibrated"]["threshold"] < 1.0
    static, hashed = (
        para["embedders"][e]["calibrated"]["conversation"]["vector"]["recall@3"] for e in ("static", "hash")
    )
    assert static > hashed  # meaning: the paraphrase questions share no word with their facts
    assert synthetic["embedders"]["static"]["floor_tokenizer_sentences_per_s"] > 0
    assert png.stat().st_size > 0
    with pytest.raises(SystemExit, match="base-url"):
        retrieval_eval.main(["--datasets", "synthetic", "--users", "1", "--embedders", "openai"])


def test_locomo_loads_as_retrieval_records(tmp_path: Path) -> None:
    """A LoCoMo-shaped file (the real one is not redistributed): speakers, captions, evidence."""
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "Back from Lisbon!"}],
            "session_2_date_time": "1 May 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "Look at my dog", "blip_caption": "a photo of a dog"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Cute!"},
            ],
        },
        "qa": [
            {"question": "Where did Ben travel?", "answer": "Lisbon", "evidence": ["D2:1", "D9:9"], "category": 1},
            {"question": "Unanswerable?", "answer": "x", "evidence": [], "category": 5},
        ],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    records, warning = locomo.load(path)
    assert warning is not None and "sha256" in warning  # not the file the README's numbers are for
    turns = [r for r in records if r["type"] == "turn"]
    assert [(t["session"], t["id"], t["role"], t["text"]) for t in turns] == [
        ("session_1", "conv-x:D1:1", "user", "Ana: Look at my dog [shares a photo: a photo of a dog]"),
        ("session_1", "conv-x:D1:2", "assistant", "Ben: Cute!"),
        ("session_2", "conv-x:D2:1", "assistant", "Ben: Back from Lisbon!"),
    ]
    assert [q["evidence"] for q in records if q["type"] == "question"] == [["conv-x:D2:1"]]


def test_vector_recall_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    result = vector_recall.main(
        [
            "--n",
            "3000",
            "--dim",
            "16",
            "--big",
            "4",
            "--small-size",
            "100",
            "--exact-threshold",
            "200",
            "--queries",
            "10",
            "--app-queries",
            "5",
        ]
    )
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and json.loads(line) == result
    assert result["hnsw_namespaces"] == 4 and sum(result["vectors_per_shard"]) == 3000
    for name in ("scoped_hnsw", "scoped_exact", "app_wide"):
        assert 0.8 <= result[name]["recall_at_10"] <= 1.0
        assert result[name]["latency"]["p50_ms"] > 0 and result[name]["floor_exact_latency"]["p50_ms"] > 0


def test_static_embedder_rate_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    result = static_embedder.main(["--texts", "300", "--repeat", "1"])
    assert json.loads(capsys.readouterr().out.strip()) == result
    for key in (
        "cold_sentences_per_s",
        "warm_sentences_per_s",
        "one_by_one_per_s",
        "memoised_sentences_per_s",
        "floor_tokenizer_sentences_per_s",
    ):
        assert result[key] > 0
    assert result["model_id"] == "static:minilm-static-v1:384"
