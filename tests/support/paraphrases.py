"""A small hand-made retrieval set: 20 source sentences on distinct topics, each with a paraphrase
that shares some words (as a user re-asking about something they said would)."""

PAIRS: list[tuple[str, str]] = [
    (
        "My flight to Tokyo leaves on Friday morning from gate 12.",
        "The Tokyo flight departs Friday morning, gate twelve.",
    ),
    ("I prefer dark mode in every code editor I use.", "Dark mode is what I like for my editors."),
    (
        "The quarterly revenue grew by eight percent compared to last year.",
        "Revenue this quarter was up eight percent year over year.",
    ),
    (
        "Our dog Max needs his vaccination appointment at the vet next week.",
        "Book the vet appointment for Max's vaccinations next week.",
    ),
    (
        "Remind me to water the tomato plants in the garden every evening.",
        "Water the garden tomatoes each evening, please remind me.",
    ),
    (
        "The database migration failed because of a missing index on the users table.",
        "Migration of the database broke: the users table lacks an index.",
    ),
    (
        "I am allergic to peanuts and shellfish, so avoid those in recipes.",
        "Avoid peanuts and shellfish in any recipe, I have allergies.",
    ),
    (
        "The kids' soccer practice moved to Wednesday afternoons at the park.",
        "Soccer practice for the kids is now Wednesday afternoon in the park.",
    ),
    (
        "Please send the signed contract to the legal department by Monday.",
        "The legal department needs the signed contract by Monday.",
    ),
    (
        "My favourite novel is a science fiction story about a generation ship.",
        "A generation-ship science fiction novel is my favourite book.",
    ),
    (
        "The apartment lease renewal requires a deposit of two months' rent.",
        "Renewing the lease on the apartment needs two months of rent as deposit.",
    ),
    (
        "We should benchmark the vector search latency on the new cluster.",
        "Benchmark vector search latency on that new cluster.",
    ),
    (
        "I'm learning to play jazz piano, mostly chord voicings and scales.",
        "Jazz piano practice: chord voicings and scales for now.",
    ),
    (
        "The marathon training plan increases weekly mileage gradually.",
        "Gradually increase the weekly mileage in marathon training.",
    ),
    (
        "Grandma's birthday party is on the twelfth of June at her house.",
        "Birthday party for grandma: June twelfth, at her house.",
    ),
    (
        "The solar panels on the roof produce less power in winter.",
        "In winter our roof solar panels generate less power.",
    ),
    ("I need to renew my passport before the trip to Brazil.", "Passport renewal is needed before my Brazil trip."),
    ("我明天要去北京出差，住在朝阳区的酒店。", "明天去北京出差，酒店在朝阳区。"),
    ("東京の天気は今週ずっと雨の予報です。", "今週の東京は雨が続く予報です。"),
    ("The coffee machine in the office kitchen is broken again.", "Again the office kitchen coffee machine broke."),
]
