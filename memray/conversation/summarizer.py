"""Summarisers: what turns an old summary and new messages into the next summary (the
:class:`~memray.conversation.summary.Summarizer` protocol).

:class:`ExtractiveSummarizer` (deterministic, no LLM, the default) and
:class:`OpenAIChatSummarizer` (any OpenAI-compatible ``chat.completions`` endpoint);
:func:`build_summarizer` makes the one a :class:`~memray.config.SummarizerConfig` describes.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from collections.abc import Iterator
from typing import Any

from memray.config import SummarizerConfig
from memray.conversation.summary import (
    TAGS,
    EstimateTokens,
    Summarizer,
    is_summary_message,
    render_message,
    strip_summary_blocks,
)
from memray.errors import MissingExtraError, SummaryError, ValidationError
from memray.models import Message
from memray.text import estimate_tokens as default_estimate_tokens

__all__ = ["ExtractiveSummarizer", "OpenAIChatSummarizer", "build_summarizer"]


# -- extractive ------------------------------------------------------------------------------
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")
_WORD = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_STOPWORDS = frozenset(
    "a an and are as at be but by can could did do does for from had has have he her his i if in "
    "is it its me my no not of on or our she so that the their them then there they this to was "
    "we were what when which who will with would you your yes ok okay just also about into than "
    "too very".split()
)


def _terms(text: str) -> tuple[str, ...]:
    """Sorted unique index terms: lowercase words (no stopwords) and CJK character bigrams."""
    terms: set[str] = set()
    for word in _WORD.findall(text.lower()):
        runs = _CJK.findall(word)
        if runs:
            for run in runs:
                terms.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
            word = _CJK.sub(" ", word)
            terms.update(w for w in word.split() if w not in _STOPWORDS)
        elif word not in _STOPWORDS:
            terms.add(word)
    return tuple(sorted(terms))  # sorted: float sums do not depend on hash order


class _Candidate:
    __slots__ = ("line", "terms", "cost", "boost")

    def __init__(self, line: str, terms: tuple[str, ...], cost: int, boost: float) -> None:
        self.line, self.terms, self.cost, self.boost = line, terms, cost, boost


class ExtractiveSummarizer:
    """A deterministic summariser that needs no LLM.

    It keeps the previous summary's most informative lines (within ``previous_share`` of the
    budget while new material is waiting) and adds the most informative sentences of the new
    messages as ``- role: sentence`` lines. "Informative" is tf-idf over all candidate lines
    with a novelty discount: a term already covered by a chosen line counts ``covered_weight``
    as much, so near-repeats lose to new facts. Chosen lines keep their original order; the
    result's estimated tokens never exceed ``max_tokens``.
    """

    def __init__(
        self,
        estimate_tokens: EstimateTokens = default_estimate_tokens,
        previous_share: float = 0.6,
        covered_weight: float = 0.3,
    ) -> None:
        self.estimate_tokens = estimate_tokens
        self.previous_share = previous_share
        self.covered_weight = covered_weight

    def summarize(self, previous: str | None, messages: list[Message], max_tokens: int) -> str:
        old = self._candidates(self._previous_lines(previous), boost=1.5)
        new = self._candidates(self._message_lines(messages), boost=1.0)
        idf = self._idf(old + new)
        covered: set[str] = set()
        old_cap = int(max_tokens * self.previous_share) if new else max_tokens
        kept_old = self._select(old, idf, covered, old_cap)
        used = sum(old[i].cost for i in kept_old)
        kept_new = self._select(new, idf, covered, max_tokens - used)
        lines = [old[i].line for i in sorted(kept_old)] + [new[i].line for i in sorted(kept_new)]
        if not lines and (old or new):
            return self._truncate((old + new)[0].line, max_tokens)
        return "\n".join(lines)

    def _previous_lines(self, previous: str | None) -> list[str]:
        if not previous:
            return []
        return [line.strip() for line in strip_summary_blocks(TAGS.sub("", previous)).splitlines() if line.strip()]

    def _message_lines(self, messages: list[Message]) -> Iterator[str]:
        for msg in messages:
            if is_summary_message(msg):
                continue
            text = strip_summary_blocks(render_message(msg))
            for sentence in _SENTENCE.split(text):
                sentence = " ".join(sentence.split())
                if sentence:
                    yield f"- {msg.role}: {sentence}"

    def _candidates(self, lines: Iterator[str] | list[str], boost: float) -> list[_Candidate]:
        out: list[_Candidate] = []
        seen: set[str] = set()
        for line in lines:
            if line in seen:
                continue
            seen.add(line)
            out.append(_Candidate(line, _terms(line.split(": ", 1)[-1]), self.estimate_tokens(line), boost))
        return out

    @staticmethod
    def _idf(candidates: list[_Candidate]) -> dict[str, float]:
        df: dict[str, int] = {}
        for cand in candidates:
            for term in cand.terms:
                df[term] = df.get(term, 0) + 1
        n = len(candidates)
        return {t: math.log((n + 1) / (d + 1)) + 1.0 for t, d in df.items()}

    def _gain(self, cand: _Candidate, idf: dict[str, float], covered: set[str]) -> float:
        if not cand.terms:
            return 0.0
        total = sum(idf[t] * (self.covered_weight if t in covered else 1.0) for t in cand.terms)
        return cand.boost * total / math.sqrt(len(cand.terms))

    def _select(self, cands: list[_Candidate], idf: dict[str, float], covered: set[str], budget: int) -> list[int]:
        """Lazy greedy: gains only shrink as ``covered`` grows, so a popped candidate whose gain
        is fresh is the best one. Ties go to the earlier line."""
        heap = [(-self._gain(c, idf, covered), i, 0) for i, c in enumerate(cands)]
        heapq.heapify(heap)
        chosen: list[int] = []
        while heap and budget > 0:
            neg_gain, i, stamp = heapq.heappop(heap)
            cand = cands[i]
            if cand.cost > budget or neg_gain >= 0:
                continue
            if stamp != len(chosen):
                heapq.heappush(heap, (-self._gain(cand, idf, covered), i, len(chosen)))
                continue
            chosen.append(i)
            budget -= cand.cost
            covered.update(cand.terms)
        return chosen

    def _truncate(self, line: str, max_tokens: int) -> str:
        words = line.split()
        while words and self.estimate_tokens(" ".join(words)) > max_tokens:
            words.pop()
        return " ".join(words)


# -- OpenAI-compatible chat ------------------------------------------------------------------
_SYSTEM_PROMPT = (
    "You maintain the running summary of a conversation between a user and an AI assistant. "
    "Update the previous summary with the new messages. Keep facts, names, numbers, preferences, "
    "decisions, open tasks and tool results that matter later; drop chit-chat. Write plain "
    "bullet points, no preamble, in the conversation's language, at most about {max_tokens} tokens."
)


_TITLE_PROMPT = (
    "Give the conversation below a short, specific title: at most 8 words, in its language, no "
    "quotes, no trailing punctuation. Answer with the title only."
)


class OpenAIChatSummarizer:
    """A summariser that asks an OpenAI-compatible ``chat.completions`` endpoint (OpenAI, vLLM,
    Ollama...). Long inputs are folded in chunks of at most ``max_input_tokens``. Failures raise
    :class:`~memray.errors.SummaryError` (the client has already retried transient errors)."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        max_input_tokens: int = 60_000,
        estimate_tokens: EstimateTokens = default_estimate_tokens,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_input_tokens = max_input_tokens
        self.estimate_tokens = estimate_tokens
        self._client: Any = None

    def _open(self) -> Any:
        if self._client is None:
            try:
                import openai  # optional dependency: the [openai] extra
            except ImportError as exc:
                raise MissingExtraError("openai", "openai") from exc
            base_url = self.base_url or os.environ.get("OPENAI_BASE_URL")
            if self.api_key is None and base_url is None:
                raise SummaryError(
                    f"no API key for the summariser model {self.model!r}: set OPENAI_API_KEY "
                    "(or SummarizerConfig.api_key_env), or point base_url at a server that needs none"
                )
            self._client = openai.OpenAI(
                api_key=self.api_key or "unused",
                base_url=base_url,
                timeout=self.timeout_s,
                max_retries=self.max_retries,
            )
        return self._client

    def summarize(self, previous: str | None, messages: list[Message], max_tokens: int) -> str:
        summary = TAGS.sub("", previous).strip() if previous else None
        for chunk in self._chunks([m for m in messages if not is_summary_message(m)]):
            summary = self._ask(summary, chunk, max_tokens)
        return summary or ""

    def _chunks(self, messages: list[Message]) -> Iterator[list[str]]:
        chunk: list[str] = []
        size = 0
        for msg in messages:
            line = f"{msg.role}: {strip_summary_blocks(render_message(msg))}"
            cost = self.estimate_tokens(line)
            if chunk and size + cost > self.max_input_tokens:
                yield chunk
                chunk, size = [], 0
            chunk.append(line)
            size += cost
        if chunk:
            yield chunk

    def _ask(self, previous: str | None, lines: list[str], max_tokens: int) -> str:
        client = self._open()  # raises MissingExtraError first if openai is absent
        import openai  # optional dependency: the [openai] extra (present: _open found it)

        user = (
            f"<previous_summary>\n{previous or '(none)'}\n</previous_summary>\n\n"
            "<new_messages>\n" + "\n\n".join(lines) + "\n</new_messages>"
        )
        try:
            response = client.chat.completions.create(
                model=self.model,
                max_tokens=max_tokens,
                temperature=0,
                messages=[
                    {"role": "system", "content": _SYSTEM_PROMPT.format(max_tokens=max_tokens)},
                    {"role": "user", "content": user},
                ],
            )
        except openai.OpenAIError as exc:
            where = self.base_url or "the OpenAI API"
            raise SummaryError(f"summariser {self.model!r} at {where} failed: {exc}") from exc
        text = response.choices[0].message.content if response.choices else None
        if not text or not text.strip():
            raise SummaryError(f"summariser {self.model!r} returned an empty summary")
        return TAGS.sub("", text).strip()

    def title(self, lines: list[str]) -> str:
        """A short title for a conversation that opens with ``lines`` (memray.conversation.title)."""
        client = self._open()
        import openai  # optional dependency: the [openai] extra (present: _open found it)

        try:
            response = client.chat.completions.create(
                model=self.model,
                max_tokens=32,
                temperature=0,
                messages=[
                    {"role": "system", "content": _TITLE_PROMPT},
                    {"role": "user", "content": "\n".join(lines)[:4000]},
                ],
            )
        except openai.OpenAIError as exc:
            raise SummaryError(f"summariser {self.model!r} could not title a conversation: {exc}") from exc
        text = response.choices[0].message.content if response.choices else None
        if not text or not text.strip():
            raise SummaryError(f"summariser {self.model!r} returned an empty title")
        return str(text).strip().strip("\"'").rstrip(".")


def build_summarizer(
    config: SummarizerConfig, estimate_tokens: EstimateTokens = default_estimate_tokens
) -> Summarizer | None:
    """The summariser ``config`` asks for; None for ``kind="none"``."""
    if config.kind == "none":
        return None
    if config.kind == "extractive":
        return ExtractiveSummarizer(estimate_tokens)
    if not config.model:
        raise ValidationError(
            "summarizer.model", config.model, "is required for kind 'openai'", "name the chat model, e.g. 'gpt-4o-mini'"
        )
    return OpenAIChatSummarizer(
        config.model,
        config.base_url,
        os.environ.get(config.api_key_env),
        config.timeout_s,
        estimate_tokens=estimate_tokens,
    )
