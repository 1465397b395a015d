"""Datasets: the normalized record format, loaders, synthetic tasks, prompts."""

from rlvr.data.records import Record, read_jsonl, write_jsonl

__all__ = ["Record", "read_jsonl", "write_jsonl"]
