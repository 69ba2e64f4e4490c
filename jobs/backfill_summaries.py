"""Bring every conversation's summary up to date, in parallel.

    python -m jobs.backfill_summaries DATA [--workers N] [--force] [--address ADDR]

The same as ``memray backfill summaries``; the job is :mod:`memray.jobs.backfill_summaries`.
"""

from __future__ import annotations

import sys

from memray.jobs.backfill_summaries import SummarizeBatches, conversation_keys, main, run

__all__ = ["SummarizeBatches", "conversation_keys", "run", "main"]

if __name__ == "__main__":
    sys.exit(main())
