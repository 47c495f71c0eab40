"""Compaction: the summary contract, the offline summarizer, span preparation and the summary
graph (ds4-reference.md 3.13; docs/compaction.md)."""
