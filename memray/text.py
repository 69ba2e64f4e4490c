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

Index terms (:func:`index_terms`)
--------------------------------
What BM25 indexes and a lexical query matches: the tokens above, from the text with English
contraction endings removed (``'ll 're 've 'd 'm 's 't``: "I'll" must not become the word "ill",
nor "we'll" "well"), without English function words (:data:`STOPWORDS`, the usual list of ~150:
"the", "my", "what", "did"...), and with Latin-script words reduced to their Snowball (Porter 2)
English stem (``"painted"``, ``"paintings"`` → ``"paint"``). A match on "my" or "the" is not
evidence that a text is about the query; a match on "paint" is, whichever form either side used.
Other scripts (CJK pairs, Cyrillic words...) are kept as tokenized. Measured on LoCoMo
(``benchmarks/retrieval_eval.py``): stop words and stems took BM25 recall@10 from 0.54 to 0.63
over the same texts.

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

import hashlib
import re
import threading
import unicodedata
import weakref
from typing import Any, TypeVar

__all__ = [
    "tokenize",
    "index_terms",
    "term_counts",
    "forget_texts",
    "TextMemo",
    "text_id",
    "STOPWORDS",
    "estimate_tokens",
    "CJK_RANGES",
]

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

# One match per estimated token: a word of n characters is cut into ceil(n / 4) matches of at
# most 4, so counting the matches is the estimate with no Python per word (6.2 -> 4.7 µs a
# simulation line, the summary trigger's count on every committed message).
_ASCII_ESTIMATE = re.compile(r"[A-Za-z0-9]{1,4}|\S")
_UNICODE_ESTIMATE = re.compile(r"[" + CJK_RANGES + r"]|" + _WORD_CHAR + r"{1,4}|\S")


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


#: English function words: never index terms (see the module docstring).
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing don down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t d ll m o re ve y ain
    aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won
    wouldn dont didnt doesnt isnt arent wasnt werent cant couldnt wouldnt shouldnt wont hasnt
    havent hadnt im ive youre youve youd theyre theyve weve hes shes thats whats theres lets""".split()
)
_LATIN_WORD = re.compile(r"[a-z]+")
_TERMS: dict[str, str] = {}  # token -> its index term ("": a function word); bounded
_MAX_TERMS = 200_000
_stemmer: Any = None
_stem_lock = threading.Lock()


def _term(token: str) -> str:
    """The index term of a token: "" for a function word, the Snowball English stem of an ASCII
    lowercase word, the token itself otherwise."""
    if token in STOPWORDS:
        return ""
    if not _LATIN_WORD.fullmatch(token):
        return token
    global _stemmer
    with _stem_lock:  # the Snowball stemmer keeps state between calls: one thread at a time
        if _stemmer is None:
            import snowballstemmer  # 10-25 ms (python -X importtime): paid by the first stemmed word

            _stemmer = snowballstemmer.stemmer("english")
        return str(_stemmer.stemWord(token))


_CONTRACTION = re.compile(r"(?<=[A-Za-z])['\u2019\u02bc](?:ll|re|ve|d|m|s|t)\b", re.IGNORECASE)


def text_id(text: str) -> int:
    """A text's identity, the same in every process and across restarts (8 bytes of BLAKE2b, as a
    signed 64-bit integer): equal texts have equal ids. 0 is no identity: the empty text's, and
    what a search that wants distinct texts never merges (an item whose text is not known)."""
    if not text:
        return 0
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little", signed=True) or 1


def index_terms(text: str) -> list[str]:
    """The terms BM25 indexes for ``text``, and a query matches (rules in the module docstring).
    Each token's term is memoised (one lookup a token instead of a stopword test, a pattern match
    and a stem lookup: ``python -m benchmarks.text_micro``); the table is bounded."""
    if "'" in text or "\u2019" in text or "\u02bc" in text:  # (the pattern alone costs ~1.5 us a text)
        text = _CONTRACTION.sub(" ", text)
    out: list[str] = []
    terms = _TERMS
    for token in tokenize(text):
        term = terms.get(token)
        if term is None:
            term = _term(token)
            if len(terms) >= _MAX_TERMS:
                terms.clear()
            terms[token] = term
        if term:
            out.append(term)
    return out


V = TypeVar("V")
_MEMOS: list[weakref.ref[TextMemo[Any]]] = []


class TextMemo(dict[str, V]):
    """A memo keyed by whole texts (their term counts here, their vectors in the static
    embedder): emptied when it reaches ``bound`` entries, as it refills while texts come, and by
    :func:`forget_texts` with every other memo of the process, since it holds texts."""

    __slots__ = ("bound", "__weakref__")

    def __init__(self, bound: int) -> None:
        super().__init__()
        self.bound = bound
        _MEMOS.append(weakref.ref(self))

    def keep(self, text: str, value: V) -> V:
        if len(self) >= self.bound:
            self.clear()
        self[text] = value
        return value


_COUNTS: TextMemo[dict[str, int]] = TextMemo(32_768)


def term_counts(text: str) -> dict[str, int]:
    """How often each of :func:`index_terms` occurs in ``text``; treat it as read-only (it is
    shared). Memoised (bounded table): a message is indexed by its shard and scored in the
    read-your-writes tails of every context until its shard confirms it, each time with the
    same text."""
    counts = _COUNTS.get(text)
    if counts is None:
        counts = {}
        for term in index_terms(text):
            counts[term] = counts.get(term, 0) + 1
        _COUNTS.keep(text, counts)
    return counts


def forget_texts() -> int:
    """Empty every :class:`TextMemo` of this process (term counts, static vectors), which hold
    whole texts (erasing a user empties them, as it empties the embedding caches); returns how
    many texts they held."""
    held = 0
    for ref in list(_MEMOS):
        memo = ref()
        if memo is None:
            _MEMOS.remove(ref)
        else:
            held += len(memo)
            memo.clear()
    return held


def estimate_tokens(text: str) -> int:
    """Estimate how many LLM tokens ``text`` costs (rule in the module docstring)."""
    return len((_ASCII_ESTIMATE if text.isascii() else _UNICODE_ESTIMATE).findall(text))
