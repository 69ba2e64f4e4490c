"""An embedder's calibration: the cosine above which two texts count as related, and how much its
similarity is worth in a hybrid score.

Cosine similarity has no fixed meaning across models: unrelated sentences score around 0.2 with
the 256-dim hash embedder and 0.3 with MiniLM, related ones 0.2-0.5 and 0.3-0.7. A hit found by
vector similarity is relevant on its own (see :mod:`memray.index.scorer`) only if its cosine
beats what unrelated texts reach with *that* model. :func:`calibrate` measures it: it embeds
:data:`CORPUS` (160 short chat-like sentences in 40 unrelated topics, written for this purpose)
and returns the 99th percentile of the cosine over every pair of sentences from different
topics (12,480 pairs): 1% of unrelated pairs reach the threshold.

Checked against data memray did not generate: on LoCoMo (a public long-conversation set), the
99th percentile of cosine between a question and the turns of *other* conversations is 0.213
for the hash embedder (calibrated: 0.208) and 0.345 for all-MiniLM-L6-v2 (calibrated: 0.308).

The same corpus says how much the similarity can be trusted: the share of *same-topic* pairs
whose cosine passes the threshold (hash embedder: 1.7%, MiniLM: 21%). Twice that share, at most
0.5, is the embedder's **vector weight** in a hybrid score (:mod:`memray.index.scorer`): the
hash embedder's similarity, which barely separates related from unrelated sentences, weighs 0.03
against the words; MiniLM's 0.42.

An embedder whose similarity puts no same-topic pair above its threshold — a constant or
one-hot function (the threshold is then 1: every unrelated pair has cosine 1), all-zero vectors
(every cosine 0) — **does not separate unrelated texts**: its vectors are ignored. The
calibration is then ``IGNORED`` (threshold 1, no cosine passes it; weight 0, hybrid is lexical),
recorded with the reason and the measured threshold, and said once with a
:class:`CalibrationWarning` (and in the log at every open). Searches stay lexical; a search in
vector mode answers lexically and says why (:mod:`memray.embedding.query`).

The calibration is recorded with the model: ``<root>/calibration.json`` maps each ``model_id``
to it, so a data directory calibrates each model once (an OpenAI-compatible endpoint is asked for
160 embeddings once). ``EmbedderConfig.min_similarity`` overrides the threshold and
``IndexConfig.vector_weight`` the weight.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import warnings
from typing import Any, NamedTuple

import numpy as np

from memray.embedding.cache import CachedEmbedder
from memray.files import atomic_write

__all__ = [
    "CORPUS",
    "QUANTILE",
    "DEFAULT",
    "IGNORED",
    "DOES_NOT_SEPARATE",
    "CALIBRATION_FILE",
    "Calibration",
    "CalibrationWarning",
    "calibrate",
    "calibration_of",
]

log = logging.getLogger(__name__)

#: The share of unrelated pairs whose cosine stays below the threshold.
QUANTILE = 0.99
CALIBRATION_FILE = "calibration.json"
_VERSION = 1


class Calibration(NamedTuple):
    threshold: float  # cosine above which a vector hit is relevant
    vector_weight: float  # the share of the vector score in a hybrid score

    @property
    def ignores_vectors(self) -> bool:
        """No cosine can pass the threshold: searches are lexical (no embedder, or one that does
        not separate unrelated texts)."""
        return not self.threshold < 1.0


#: Used while a model cannot be calibrated (its endpoint is down); not recorded.
DEFAULT = Calibration(0.3, 0.2)
#: The calibration of an embedder whose vectors are ignored (module docstring).
IGNORED = Calibration(1.0, 0.0)
DOES_NOT_SEPARATE = "this embedder does not separate unrelated texts — vector scores are ignored"


class CalibrationWarning(UserWarning):
    """An embedder's vectors are ignored: its calibration found they do not separate unrelated
    texts (:mod:`memray.embedding.calibration`)."""


#: Topic -> sentences. Sentences of one topic may be related; of two topics, they are not.
CORPUS: dict[str, tuple[str, ...]] = {
    "cooking": (
        "I made a big pot of lentil soup with cumin and carrots last night.",
        "Can you suggest a quick pasta sauce that uses fresh tomatoes?",
        "My sourdough starter finally bubbled after five days on the counter.",
        "We roasted a chicken with lemon, garlic and rosemary for dinner.",
    ),
    "gardening": (
        "The tomato plants need staking before the stems bend over.",
        "I repotted the fern into a bigger clay pot with fresh compost.",
        "Slugs ate half of the lettuce seedlings in the raised bed.",
        "When should I prune the apple tree in the back garden?",
    ),
    "running": (
        "I ran ten kilometres this morning at an easy pace.",
        "My knee hurts after long runs on the concrete path.",
        "The half marathon starts at seven, so I need to sleep early.",
        "Interval training on the track made my legs sore for days.",
    ),
    "programming": (
        "The unit tests fail because the mock returns None instead of a list.",
        "I refactored the parser into smaller functions and it got faster.",
        "Which Python version added the match statement?",
        "The build breaks on the CI server but works on my laptop.",
    ),
    "databases": (
        "The query is slow because the join scans the whole orders table.",
        "We added an index on the customer id column.",
        "Postgres vacuum runs every night after the backup.",
        "The migration renamed the column and broke the report.",
    ),
    "weather": (
        "It is sunny and warm today, perfect for a picnic.",
        "Heavy rain is expected all weekend with strong winds.",
        "The snow on the roads made the commute take two hours.",
        "A thunderstorm knocked out the power in our street.",
    ),
    "travel": (
        "Our flight to Lisbon leaves at six in the morning.",
        "I lost my luggage at the airport in Frankfurt.",
        "The hotel room had a balcony facing the harbour.",
        "We took the night train across the mountains to Vienna.",
    ),
    "finance": (
        "I moved my savings into an index fund last month.",
        "The electricity bill doubled compared to last winter.",
        "Our mortgage rate resets next year, so payments may rise.",
        "Can I deduct home office costs from my taxes?",
    ),
    "pets": (
        "The puppy chewed through the sofa cushion again.",
        "Our cat sleeps in the laundry basket every afternoon.",
        "The vet said the dog needs a vaccine booster.",
        "The goldfish tank needs a new filter.",
    ),
    "music": (
        "I practise scales on the cello for half an hour each day.",
        "The concert band is playing a Dvorak symphony in May.",
        "My guitar string snapped during the last song.",
        "She sings in the choir at the community hall.",
    ),
    "health": (
        "The doctor prescribed antibiotics for my ear infection.",
        "I have a dentist appointment to fix a cracked filling.",
        "My blood pressure was a little high at the checkup.",
        "Allergy season makes my eyes itch every spring.",
    ),
    "family": (
        "My sister is getting married in September.",
        "Grandpa turned ninety and we threw him a party.",
        "The kids fought over the last slice of cake.",
        "My parents are visiting us over the holidays.",
    ),
    "housing": (
        "The landlord finally fixed the leaking kitchen tap.",
        "We are looking for a two bedroom flat near the station.",
        "The heating broke and the flat was freezing all night.",
        "Painting the hallway took the whole weekend.",
    ),
    "cars": (
        "The car needs new brake pads before the long drive.",
        "My engine warning light came on on the motorway.",
        "We bought a used electric hatchback with low mileage.",
        "The parking ticket was forty euros.",
    ),
    "books": (
        "I finished a mystery novel about a lighthouse keeper.",
        "The library holds my copy of the history book until Friday.",
        "Her memoir describes growing up on a farm.",
        "Our book club is reading a long Russian classic.",
    ),
    "movies": (
        "We watched an old black and white film noir last night.",
        "The sequel was worse than the original animated movie.",
        "The cinema was almost empty for the late screening.",
        "That documentary about whales was beautiful.",
    ),
    "football": (
        "The striker scored twice in the second half.",
        "Our team lost the derby on penalties.",
        "The referee gave a red card after ten minutes.",
        "Season tickets for the stadium sold out quickly.",
    ),
    "work_meetings": (
        "The quarterly planning meeting moved to Thursday afternoon.",
        "My manager wants the slides by tomorrow morning.",
        "The client rejected the proposal and asked for a discount.",
        "We hired two new engineers for the platform team.",
    ),
    "school": (
        "The maths exam covers fractions and long division.",
        "My son forgot his homework at school again.",
        "The teacher organised a trip to the science museum.",
        "Parents evening is next Tuesday at six.",
    ),
    "shopping": (
        "I returned the shoes because they were too small.",
        "The supermarket was out of oat milk again.",
        "I ordered a new kettle online and it arrived broken.",
        "The sale at the furniture store ends on Sunday.",
    ),
    "astronomy": (
        "Jupiter is visible low in the east after sunset.",
        "The telescope needs collimating before the meteor shower.",
        "A solar eclipse will cross the country next year.",
        "We photographed the Andromeda galaxy from the hills.",
    ),
    "chemistry_lab": (
        "The titration needed three more drops of sodium hydroxide.",
        "Wear goggles when heating the copper sulphate solution.",
        "The reaction released a lot of heat and gas.",
        "We measured the melting point of the crystals.",
    ),
    "hiking": (
        "The trail to the ridge is steep and rocky.",
        "We camped beside a lake below the glacier.",
        "My boots gave me blisters on the descent.",
        "Fog rolled in and we lost the path near the summit.",
    ),
    "cycling": (
        "I fixed a flat tyre on the way to work.",
        "The bike lane on the bridge is finally open.",
        "My chain keeps slipping on the highest gear.",
        "We cycled along the canal to the next village.",
    ),
    "phones": (
        "My phone battery dies before lunch.",
        "The screen cracked when I dropped it on the stairs.",
        "The new update changed where the settings are.",
        "I need a charger with a USB-C cable.",
    ),
    "coffee": (
        "This espresso is too bitter, maybe the grind is too fine.",
        "The cafe on the corner roasts its own beans.",
        "I switched to decaf after three in the afternoon.",
        "The milk frother on the machine stopped working.",
    ),
    "baking": (
        "The cake sank in the middle because I opened the oven.",
        "Use cold butter for flaky pastry.",
        "The cookies spread too thin on the tray.",
        "I iced the cupcakes with cream cheese frosting.",
    ),
    "painting_art": (
        "I am painting a watercolour of the harbour at dusk.",
        "The gallery opened an exhibition of modern sculpture.",
        "Acrylic paint dries much faster than oils.",
        "She sketches people on the train every morning.",
    ),
    "languages": (
        "I am learning Spanish verbs with flash cards.",
        "Japanese has three writing systems to learn.",
        "My French accent still sounds very English.",
        "We practise German with a tandem partner online.",
    ),
    "insurance": (
        "The insurer refused the claim for the water damage.",
        "Our car insurance premium went up after renewal.",
        "Travel insurance covers cancelled flights for illness.",
        "I need to update the policy with our new address.",
    ),
    "elections": (
        "Polling stations open at seven on election day.",
        "The candidate promised to build more social housing.",
        "Turnout was low in the local council vote.",
        "The debate focused on taxes and public transport.",
    ),
    "fishing": (
        "We caught three trout in the river before noon.",
        "The fishing line tangled around the reel.",
        "You need a permit to fish in the national park.",
        "The boat drifted while we waited for a bite.",
    ),
    "swimming": (
        "The pool is closed for cleaning on Mondays.",
        "I swam forty lengths of front crawl today.",
        "My goggles keep leaking water.",
        "The sea was cold but calm this morning.",
    ),
    "knitting": (
        "I am knitting a wool scarf with a cable pattern.",
        "I dropped a stitch and had to unravel three rows.",
        "The yarn shop has a sale on merino.",
        "She knits socks for the whole family every winter.",
    ),
    "video_games": (
        "I finally beat the final boss on hard mode.",
        "The online server lagged all evening.",
        "The game patch nerfed my favourite character.",
        "We played a co-op puzzle game until midnight.",
    ),
    "plumbing": (
        "The toilet cistern keeps running after each flush.",
        "Water is dripping under the bathroom sink.",
        "The plumber replaced the boiler pressure valve.",
        "The shower drain is blocked with hair.",
    ),
    "wedding": (
        "The wedding venue can seat one hundred guests.",
        "We still need to choose the cake and the flowers.",
        "The best man's speech made everyone laugh.",
        "Invitations go out six months before the date.",
    ),
    "photography": (
        "The lens is sharp but the autofocus is slow.",
        "I shoot landscapes at golden hour for softer light.",
        "Raw files take a lot of space on the memory card.",
        "The tripod wobbles in strong wind.",
    ),
    "climate_energy": (
        "We installed solar panels on the garage roof.",
        "Heat pumps work well in well insulated houses.",
        "The wind farm offshore powers thousands of homes.",
        "Our energy supplier offers a cheaper night tariff.",
    ),
    "childcare": (
        "The nursery closes at six so I leave work early.",
        "The baby wakes up every three hours at night.",
        "We found a babysitter for Saturday evening.",
        "Potty training is going slowly.",
    ),
}


def calibrate(embedder: Any) -> Calibration:
    """The threshold that :data:`QUANTILE` of cross-topic pairs of :data:`CORPUS` stay below, and
    the vector weight from the share of same-topic pairs above it (module docstring);
    :data:`IGNORED` for an embedder that does not separate unrelated texts."""
    return _measure(embedder)[0]


def _measure(embedder: Any) -> tuple[Calibration, float]:
    """The calibration, and the threshold as measured (before an embedder that does not separate
    unrelated texts is ignored)."""
    if isinstance(embedder, CachedEmbedder):  # 160 calibration sentences would only crowd the cache
        embedder = embedder.embedder
    texts = [s for sentences in CORPUS.values() for s in sentences]
    topic = np.repeat(np.arange(len(CORPUS)), [len(s) for s in CORPUS.values()])
    vectors = np.asarray(embedder.embed(texts), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms > 0, norms, 1.0)
    sims = unit @ unit.T
    same = topic[:, None] == topic[None, :]
    threshold = float(np.quantile(sims[~same], QUANTILE))
    related = sims[same & ~np.eye(len(texts), dtype=bool)]
    share = float(np.mean(related > threshold))
    if not (math.isfinite(threshold) and threshold < 1.0 and share > 0.0):
        return IGNORED, threshold
    return Calibration(round(threshold, 4), round(min(0.5, 2.0 * share), 4)), threshold


def calibration_of(root: str | None, embedder: Any) -> Calibration:
    """The calibration of ``embedder``: the one recorded for its ``model_id`` under ``root``, else
    measured now and recorded (durably: temp file, fsync, rename). A model that cannot embed
    right now (endpoint down) gets :data:`DEFAULT` for this run, and is calibrated on a later open.
    A model whose vectors are ignored is said so: a :class:`CalibrationWarning` when it is
    measured, the log at every open."""
    path = os.path.join(root, CALIBRATION_FILE) if root else None
    records = _read(path)
    known = records.get(embedder.model_id)
    if known is not None and known.get("version") == _VERSION:
        recorded = Calibration(float(known["threshold"]), float(known["vector_weight"]))
        if known.get("ignored"):
            log.warning("%s: %s (recorded in %s)", embedder.model_id, known["ignored"], path)
        return recorded
    try:
        calibration, measured = _measure(embedder)
    except Exception as exc:  # the endpoint is down, the model did not load: try again next open
        log.warning("could not calibrate %s (%s); using %s until it can be", embedder.model_id, exc, DEFAULT)
        return DEFAULT
    ignored = DOES_NOT_SEPARATE if calibration == IGNORED else None
    if ignored:
        message = f"{embedder.model_id}: {ignored} (its unrelated text pairs reach cosine {measured:.4g})"
        warnings.warn(message, CalibrationWarning, stacklevel=2)
    if path is not None:
        records[embedder.model_id] = {
            "version": _VERSION,
            **calibration._asdict(),
            "quantile": QUANTILE,
            "pairs": _pairs(),
            "calibrated_at": time.time(),
            **({"ignored": ignored, "measured_threshold": measured} if ignored else {}),
        }
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, lambda fh: fh.write(json.dumps(records, indent=1, sort_keys=True).encode()))
    return calibration


def _pairs() -> int:
    sizes = [len(s) for s in CORPUS.values()]
    total = sum(sizes)
    return (total * total - sum(n * n for n in sizes)) // 2


def _read(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    return data if isinstance(data, dict) else {}
