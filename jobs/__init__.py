"""The batch jobs' entry points: ``python -m jobs.backfill_embeddings DATA ...`` and
``python -m jobs.backfill_summaries DATA ...`` (what ``ray job submit`` runs on a cluster).

Each is a few lines over its job in :mod:`memray.jobs`, where the logic lives: memray never imports
this folder, and ``memray backfill embeddings|summaries`` runs the same code.
"""
