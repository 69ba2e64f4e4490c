from __future__ import annotations

import re

import pytest
import snowballstemmer
from hypothesis import given, settings
from hypothesis import strategies as st

import memray.text as text_module
from memray.text import STOPWORDS, TextMemo, estimate_tokens, forget_texts, index_terms, term_counts, tokenize


def test_lowercase_words() -> None:
    assert tokenize("Hello, World! 42 times") == ["hello", "world", "42", "times"]


@pytest.mark.parametrize("query", ["dont", "don't", "don’t", "DON'T"])
@pytest.mark.parametrize("text", ["I don't know", "I dont know", "i DON’T know"])
def test_apostrophes_never_block_matching(query: str, text: str) -> None:
    assert set(tokenize(query)) & set(tokenize(text)) >= {"dont"}


def test_compounds_emit_pieces_and_joined_form() -> None:
    assert tokenize("e-mail") == ["e", "mail", "email"]
    assert tokenize("snake_case") == ["snake", "case", "snakecase"]
    assert "email" in tokenize("send an email") and "email" in tokenize("send an e-mail")


def test_trailing_punctuation_and_query_syntax_are_plain_text() -> None:
    assert tokenize('what? "quoted" -minus (x) AND OR * end.') == ["what", "quoted", "minus", "x", "and", "or", "end"]


def test_cjk_runs_give_unigrams_then_bigrams() -> None:
    assert tokenize("我喜欢猫") == ["我", "喜", "欢", "猫", "我喜", "喜欢", "欢猫"]
    assert tokenize("猫") == ["猫"]


def test_mixed_scripts_split_at_script_boundary() -> None:
    assert tokenize("iPhone手机") == ["iphone", "手", "机", "手机"]
    assert tokenize("カタカナ・テスト")[:4] == ["カ", "タ", "カ", "ナ"]
    assert "안녕" in tokenize("안녕하세요")


def test_unicode_normalisation_and_casefold() -> None:
    assert tokenize("ＡＢＣ Straße café") == ["abc", "strasse", "café"]


def test_emoji_are_tokens_other_symbols_dropped() -> None:
    assert tokenize("party 🎉 $5 + ok") == ["party", "🎉", "5", "ok"]


_WORDS = st.sampled_from(["I", "don't", "we’ll", "WEʼD", "runs", "running", "the", "of", "猫", "e-mail", "cafés"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_WORDS | st.text(max_size=6), max_size=10).map(" ".join))
def test_index_terms_are_the_rules_applied_token_by_token_whatever_the_memo_holds(text: str) -> None:
    """Contractions cut, function words dropped, ASCII words stemmed, other tokens kept: from a
    cold table of token terms and from the warm one alike."""
    stemmer = snowballstemmer.stemmer("english")
    tokens = tokenize(re.sub(r"(?<=[A-Za-z])['\u2019\u02bc](?:ll|re|ve|d|m|s|t)\b", " ", text, flags=re.IGNORECASE))
    expected = [stemmer.stemWord(t) if re.fullmatch("[a-z]+", t) else t for t in tokens if t not in STOPWORDS]
    text_module._TERMS.clear()
    assert index_terms(text) == expected
    assert index_terms(text) == expected


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_tokenizes_to_nonempty_tokens_without_spaces(text: str) -> None:
    tokens = tokenize(text)
    assert all(tok and not any(ch.isspace() for ch in tok) for tok in tokens)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126)))
def test_ascii_tokens_are_lowercase_alphanumerics(text: str) -> None:
    tokens = tokenize(text)
    assert all(tok.isalnum() and tok == tok.lower() for tok in tokens)
    words = "".join(ch if ch.isalnum() else " " for ch in text.lower()).split()
    assert set(words) <= set(tokens)  # every word of the text is findable


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("   \n\t", 0),
        ("hello", 2),  # 5 letters -> ceil(5/4)
        ("hi there", 3),  # 1 + 2
        ("hello, world!", 6),  # 2 + 1 + 2 + 1
        ("我喜欢猫", 4),  # one per CJK character
        ("こんにちは", 5),
        ("안녕하세요", 5),
        ("iPhone手机", 4),  # 2 + 1 + 1
        ("🎉", 1),
    ],
)
def test_estimate_tokens_rule(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_estimate_is_cjk_aware_not_chars_over_four() -> None:
    chinese = "我们明天在北京开会讨论项目" * 10
    assert estimate_tokens(chinese) == len(chinese)
    assert estimate_tokens(chinese) > 3 * (len(chinese) // 4)


def test_a_text_memo_is_bounded_and_forgetting_texts_empties_every_one() -> None:
    memo: TextMemo[int] = TextMemo(3)
    for n in range(5):
        assert memo.keep(f"text {n}", n) == n
        assert len(memo) <= 3
    assert memo == {"text 3": 3, "text 4": 4}  # emptied when full, refilled
    term_counts("a text about sailing boats")
    assert "a text about sailing boats" in text_module._COUNTS
    assert forget_texts() >= 3
    assert not memo and "a text about sailing boats" not in text_module._COUNTS
