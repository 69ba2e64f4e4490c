"""Shared text handling: the tokenizer used by the hash embedder and the lexical index, and a
CJK-aware token estimate for context budgets and summary triggers.

Tokenization rules (:func:`tokenize`)
-------------------------------------
* Text is NFKC-normalised (only when it is not plain ASCII: full-width forms, ligatures) and
  case-folded (``"Straße"`` → ``"strasse"``). Diacritics are kept.
* A *word* is a run of letters and digits. Words joined by a connector — one of ``' ’ ʼ - ‐ _ .``
  between two word characters — form a *compound*; a compound emits each piece and then the
  pieces joined: ``"don't"`` → ``don, t, dont``; ``"e-mail"`` → ``e, mail, email``. So a query
  ``dont``, ``don't`` or ``don’t`` matches a text written either way, and punctuation never
  blocks a match. Any other punctuation just separates words.
* Han, Kana and Hangul runs have no reliable word boundaries, so each run emits its characters
  (unigrams) followed by its adjacent pairs (bigrams): ``"我喜欢猫"`` → ``我 喜 欢 猫 我喜 喜欢 欢猫``.
* Non-ASCII symbols of category ``So`` (emoji, ©, ™) are one token each; everything else that
  is not a word character (spaces, punctuation, ASCII symbols, joiners) is dropped.
* Any string is safe: there is no query syntax and nothing raises.

Token estimate (:func:`estimate_tokens`)
----------------------------------------
An approximation of BPE tokenizers (cl100k/o200k style) that does not undercount CJK the way
``len(text) / 4`` does:

* each Han, Kana or Hangul character counts 1;
* each other word (letters and digits) counts ``ceil(len / 4)``, at least 1;
* each other non-space character (punctuation, symbols, emoji) counts 1;
* whitespace counts 0.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["tokenize", "estimate_tokens", "CJK_RANGES"]

#: Han, Kana and Hangul code points (the katakana middle dot U+30FB, a punctuation mark, is left
#: out so it separates words).
CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u30fa\u30fc-\u30ff"  # Hiragana, Katakana
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7ff"  # Hangul syllables, Jamo extended B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana (NFKC folds most of these)
    "\U00020000-\U0003134f"  # CJK extensions B-G
)
_CONNECTORS = "'\u2019\u02bc\\-\u2010_."

_ASCII_WORD = re.compile(r"[a-z0-9]+(?:[" + _CONNECTORS + r"][a-z0-9]+)*")
_ASCII_SIMPLE = re.compile(r"[a-z0-9]+")
# Starts with the connector class so the regex engine skips ahead quickly.
_ASCII_JOINED = re.compile(r"[" + _CONNECTORS + r"](?<=[a-z0-9].)(?=[a-z0-9])")
_WORD_CHAR = r"(?:(?![" + CJK_RANGES + r"])[^\W_])"
_UNICODE_TOKEN = re.compile(
    r"([" + CJK_RANGES + r"]+)"
    r"|(" + _WORD_CHAR + r"+(?:[" + _CONNECTORS + r"]" + _WORD_CHAR + r"+)*)"
    r"|([^\x00-\x7f\w\s])"
)
_SPLIT = re.compile(r"[" + _CONNECTORS + r"]")
_CONNECTOR_SET = frozenset("'\u2019\u02bc-\u2010_.")

_ASCII_ESTIMATE = re.compile(r"[A-Za-z0-9]+|\S")
_UNICODE_ESTIMATE = re.compile(r"([" + CJK_RANGES + r"]+)|(" + _WORD_CHAR + r"+)|\S")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lowercase search/embedding tokens (rules in the module docstring)."""
    if text.isascii():
        text = text.lower()
        if _ASCII_JOINED.search(text) is None:  # the common case: no compounds, one fast pass
            return _ASCII_SIMPLE.findall(text)
        return _expand_compounds(_ASCII_WORD.findall(text))
    text = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    for match in _UNICODE_TOKEN.finditer(text):
        cjk, word, symbol = match.groups()
        if cjk is not None:
            _emit_cjk(cjk, out)
        elif word is not None:
            if _has_connector(word):
                _emit_compound(word, out)
            else:
                out.append(word)
        elif symbol is not None and unicodedata.category(symbol) == "So":
            out.append(symbol)
    return out


def _has_connector(word: str) -> bool:
    return not _CONNECTOR_SET.isdisjoint(word)


def _expand_compounds(words: list[str]) -> list[str]:
    out: list[str] = []
    for word in words:
        if _has_connector(word):
            _emit_compound(word, out)
        else:
            out.append(word)
    return out


def _emit_compound(word: str, out: list[str]) -> None:
    pieces = _SPLIT.split(word)
    out.extend(pieces)
    out.append("".join(pieces))


def _emit_cjk(run: str, out: list[str]) -> None:
    out.extend(run)
    out.extend(run[i : i + 2] for i in range(len(run) - 1))


def estimate_tokens(text: str) -> int:
    """Estimate how many LLM tokens ``text`` costs (rule in the module docstring)."""
    total = 0
    if text.isascii():
        for match in _ASCII_ESTIMATE.findall(text):
            total += (len(match) + 3) // 4 if match[0].isalnum() else 1
        return total
    for match in _UNICODE_ESTIMATE.finditer(text):
        cjk, word = match.group(1), match.group(2)
        if cjk is not None:
            total += len(cjk)
        elif word is not None:
            total += (len(word) + 3) // 4
        else:
            total += 1
    return total
