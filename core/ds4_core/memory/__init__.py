"""Memory and pins (docs/memory.md; docs/reference.md §3.16): the mutation events of Pi custom
entries (`events`), claim keys and conflicts (`claims`), and their replay into the current
items (`replay`). Pure: the store's projection is `store/memory.py`."""
