"""Batch jobs over a memray data directory, on Ray Data.

- :mod:`jobs.backfill_embeddings` — (re-)embed every message and entry with a model, build its
  indexes next to the active ones and cut over atomically; resumable and idempotent.
- :mod:`jobs.backfill_summaries` — bring every conversation's summary up to date in parallel.

Both run locally (``python -m jobs.<name> DATA``; a local Ray is started, or joined with
``--address``) and through ``ray job submit``. They talk to the store through memray's named
actors: a running memray is joined, otherwise the job opens it itself (see :mod:`jobs.common`).
"""
