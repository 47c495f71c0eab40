"""Compaction: the summary contract, the offline summarizer, span preparation and the summary
graph (docs/reference.md §3.13; docs/compaction.md)."""
