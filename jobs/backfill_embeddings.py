"""Re-embed every message and entry with a model, build its indexes and cut over atomically.

    python -m jobs.backfill_embeddings DATA --model hash:384 | openai:<model>[:dim] | local:<name> ...

The same as ``memray backfill embeddings``; the job is :mod:`memray.jobs.backfill_embeddings`.
"""

from __future__ import annotations

import sys

from memray.jobs.backfill_embeddings import EmbedBatches, main, parse_model, run

__all__ = ["parse_model", "run", "main", "EmbedBatches"]

if __name__ == "__main__":
    sys.exit(main())
