"""Batch jobs over a memray data directory, on Ray Data.

- :mod:`memray.jobs.backfill_embeddings` — (re-)embed every message and entry with a model, build
  its indexes next to the active ones and cut over atomically; resumable and idempotent.
- :mod:`memray.jobs.backfill_summaries` — bring every conversation's summary up to date in parallel.

Both run as ``memray backfill embeddings|summaries DATA`` or ``python -m jobs.<name> DATA`` (the
entry points in the repository's ``jobs/``, also what ``ray job submit`` runs); a local Ray is
started, or joined with ``--address``. They talk to the store through memray's named actors: a
running memray is joined, otherwise the job opens it itself (see :mod:`memray.jobs.common`).

The jobs drive Ray Data pipelines, so — with the actors module and the Serve app — they are the
only part of memray that imports ``ray``; they sit at the top, beside :mod:`memray.cli`.
"""
