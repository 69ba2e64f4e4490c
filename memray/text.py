"""Text helpers shared by the cores.

NOTE for the integrator: another helper writes this module in parallel; this copy holds only
:func:`estimate_tokens`, which the conversation summary and context code need. Merge the two.
"""

from __future__ import annotations

import re

__all__ = ["estimate_tokens"]

# CJK ideographs (with extensions and compatibility forms), kana, hangul, and CJK/fullwidth
# punctuation: tokenizers spend about one token per such character.
_CJK = (
    "\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # extension A
    "\u4e00-\u9fff"  # unified ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\uf900-\ufaff"  # compatibility ideographs
    "\uff00-\uffef"  # halfwidth and fullwidth forms
    "\U00020000-\U0002fa1f"  # extensions B-F and compatibility supplement
)
_PIECE = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")


def estimate_tokens(text: str) -> int:
    """Estimate the tokens ``text`` costs a typical BPE tokenizer, without a tokenizer.

    One token per CJK character (and CJK punctuation); every other whitespace-separated run
    costs ``ceil(len / 4)`` tokens, and at least one. Empty text costs 0. This is deliberately
    not plain ``len / 4``, which undercounts Chinese or Japanese text about fourfold.
    """
    total = 0
    for match in _PIECE.finditer(text):
        piece = match.group()
        total += 1 if len(piece) == 1 else -(-len(piece) // 4)
    return total
