"""Minimal tokenizer (placeholder written by the index helper; the text helper's version replaces
it at merge). Words are ``\\w+`` runs, lowercased; CJK runs are emitted as character unigrams and
bigrams so CJK text without spaces is searchable."""

from __future__ import annotations

import re

__all__ = ["tokenize"]

_WORD = re.compile(r"\w+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens of ``text``; CJK runs become unigrams plus bigrams."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        pos = 0
        for m in _CJK.finditer(word):
            if m.start() > pos:
                out.append(word[pos : m.start()])
            run = m.group()
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
            pos = m.end()
        if pos < len(word):
            out.append(word[pos:])
    return out
