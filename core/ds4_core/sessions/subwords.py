"""Sub-words of a history entry's searchable text, for the sub-word index `entries_subwords`
(migration 9, `store.migrations`; docs/retrieval.md "History scope").

FTS5's `unicode61` tokenizer keeps a camelCase identifier as one token (`mdLinkUrl` ->
`mdlinkurl`) and a run of CJK characters with the letters glued to it as one token
(`itgc的悬空引用`), so a request saying "link url" or "itgc" never meets them. The index
splits them here, in Python, when the entry is stored:

* a token with an inner lower-to-upper change is split into its humps (`mdLinkUrl` ->
  `md Link Url`; `HTTPServer` -> `HTTP Server`); snake_case needs nothing (`_` already
  separates tokens in unicode61);
* a token mixing CJK and other letters is split at the script change (`修复了gen` -> `gen`), and
  every CJK run longer than one character becomes its consecutive character pairs (CJK writes
  no spaces and most words are two characters: `悬空引用` -> `悬空 空引 引用`).

`subword_text` returns the parts joined by spaces ("" when the text has none), at most
`MAX_SUBWORDS` of them, each distinct token once. Pure and deterministic.
"""

from __future__ import annotations

import re

MAX_SUBWORDS = 4000
"""Most parts one entry contributes (a huge pasted file must not make a huge index row)."""

_CAMEL_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z0-9]*[a-z0-9][A-Z][A-Za-z0-9]*"
)  # starts a run only
_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_TOKEN = re.compile(rf"[^\W_]*[{_CJK}][^\W_]*")
_CJK_RUN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_CHAR = re.compile(rf"[{_CJK}]")


def camel_parts(token: str) -> list[str]:
    """The humps of a camelCase / PascalCase `token` (`getThinkingBorderColor` -> `get`,
    `Thinking`, `Border`, `Color`); [] when it has fewer than two."""
    parts = _HUMP.findall(token)
    return parts if len(parts) > 1 else []


def cjk_pairs(run: str) -> list[str]:
    """Consecutive character pairs of a CJK `run` (the run itself when it is 1-2 long)."""
    if len(run) <= 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def cjk_parts(token: str) -> list[str]:
    """The parts of a `token` holding CJK: its non-CJK letter runs, and the pairs of each CJK
    run (`itgc的悬空引用` -> `itgc`, `的悬`, `悬空`, `空引`, `引用`)."""
    parts: list[str] = []
    for run in _CJK_RUN.findall(token):
        if _CJK_CHAR.match(run):
            parts.extend(cjk_pairs(run))
        else:
            parts.append(run)
    return parts


def subword_text(text: str) -> str:
    """The sub-words of `text` for `entries_subwords` (module docstring); "" if none."""
    seen: dict[str, None] = {}
    for token in dict.fromkeys(_CAMEL_TOKEN.findall(text)):
        for part in camel_parts(token):
            seen[part] = None
        if len(seen) >= MAX_SUBWORDS:
            break
    if not text.isascii():
        for token in dict.fromkeys(_CJK_TOKEN.findall(text)):
            for part in cjk_parts(token):
                seen[part] = None
            if len(seen) >= MAX_SUBWORDS:
                break
    return " ".join(list(seen)[:MAX_SUBWORDS])


__all__ = ["MAX_SUBWORDS", "camel_parts", "cjk_pairs", "cjk_parts", "subword_text"]
