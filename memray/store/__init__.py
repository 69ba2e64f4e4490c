"""Durable truth: the DuckDB history store and its Parquet exports."""
