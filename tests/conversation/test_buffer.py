from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memray.conversation.buffer import MessageBuffer
from memray.models import Message, TextPart, ToolPart


def msg(mid: str, role: str, text: str) -> Message:
    return Message(id=mid, role=role, parts=[TextPart(text=text)])


def test_streamed_assistant_steps_merge_into_one_message():
    buf = MessageBuffer(window=8)
    buf.add(msg("a1", "assistant", "Let me check."), 1)
    step = Message(
        id="a1", role="assistant", parts=[ToolPart(tool_call_id="t1", tool_name="weather", input={"city": "Oslo"})]
    )
    buf.add(step, 2)
    buf.add(step, 3)  # idempotent: the same step twice adds nothing
    stored = buf.get("a1")
    assert stored is not None and stored.seq == 1
    assert [p.type for p in stored.parts] == ["text", "tool"]


def test_tool_result_merges_into_its_call_by_id():
    buf = MessageBuffer(window=8)
    call = Message(id="a1", role="assistant", parts=[ToolPart(tool_call_id="t1", tool_name="weather", input={})])
    buf.add(call, 1)
    result = Message(
        id="r1", role="tool", parts=[ToolPart(tool_call_id="t1", tool_name="weather", state="output", output="sunny")]
    )
    stored = buf.add(result, 2)
    assert stored.id == "a1" and stored.seq == 1
    part = stored.parts[0]
    assert isinstance(part, ToolPart) and part.state == "output" and part.output == "sunny"
    assert buf.get("r1") is None and len(buf) == 1


def test_user_message_readded_replaces_parts_and_keeps_seq():
    buf = MessageBuffer(window=8)
    buf.add(msg("m", "user", "first"), 1)
    stored = buf.add(msg("m", "user", "edited"), 2)
    assert stored.seq == 1 and stored.text == "edited"


def test_pending_and_inflight_are_never_evicted():
    buf = MessageBuffer(window=2)
    for i in range(1, 6):
        buf.add(msg(f"m{i}", "user", str(i)), i)
    assert len(buf) == 5  # all pending
    drained = buf.drain()
    assert [m.seq for m in drained] == [1, 2, 3, 4, 5]
    assert len(buf) == 5  # in flight
    buf.settle([m.id for m in drained])
    assert [m.seq for m in buf.recent()] == [4, 5]
    assert buf.evicted


class BufferMachine(RuleBasedStateMachine):
    """The buffer against a model: a dict of id -> (seq, text), pending and in-flight sets."""

    def __init__(self) -> None:
        super().__init__()
        self.buf = MessageBuffer(window=3)
        self.seq = 0
        self.model: dict[str, tuple[int, str]] = {}
        self.pending: set[str] = set()
        self.inflight: set[str] = set()
        self.durable: set[str] = set()
        self.drained: list[str] = []
        self.used: set[int] = set()  # seqs given to a message

    @rule(text=st.text(max_size=5))
    def add_new(self, text: str) -> None:
        self.seq += 1 + self.seq % 3  # gaps, which place_durable_late fills
        self.used.add(self.seq)
        mid = f"m{self.seq}"
        stored = self.buf.add(msg(mid, "user", text), self.seq)
        assert stored.seq == self.seq
        self.model[mid] = (self.seq, text)
        self.pending.add(mid)

    @rule(back=st.integers(1, 4), text=st.text(max_size=5))
    def place_durable_late(self, back: int, text: str) -> None:
        """A durable message loaded from the store, older than messages already held (out of
        seq order): reads must still answer in seq order."""
        seq = self.seq - back
        if seq <= 0 or seq in self.used:
            return
        mid = f"d{seq}"
        self.buf.put_durable(msg(mid, "user", text).model_copy(update={"seq": seq}))
        self.used.add(seq)
        self.model[mid] = (seq, text)
        self.durable.add(mid)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), text=st.text(max_size=5))
    def readd(self, data: st.DataObject, text: str) -> None:
        mid = data.draw(st.sampled_from(sorted(self.model)))
        if self.buf.get(mid) is None:
            return  # evicted: the host handles it through the store
        stored = self.buf.add(msg(mid, "user", text), 10_000)
        assert stored.seq == self.model[mid][0]
        self.model[mid] = (self.model[mid][0], text)
        self.pending.add(mid)

    @rule()
    def drain(self) -> None:
        out = self.buf.drain()
        assert {m.id for m in out} == self.pending
        assert [m.seq for m in out] == sorted(m.seq for m in out)
        for m in out:
            assert m.text == self.model[m.id][1]
        self.inflight |= self.pending
        self.pending = set()
        self.drained = [m.id for m in out]

    @rule()
    def commit(self) -> None:
        self.buf.settle(self.drained)
        self.inflight -= set(self.drained)
        self.durable |= set(self.drained)
        self.drained = []

    @rule()
    def fail(self) -> None:
        self.buf.mark_pending(self.drained)
        self.inflight -= set(self.drained)
        self.pending |= set(self.drained)
        self.drained = []

    @rule()
    def checkpoint_restore(self) -> None:
        cp = self.buf.checkpoint()
        self.buf.restore(cp)
        self.pending |= self.inflight
        self.inflight = set()
        self.drained = []

    @invariant()
    def unsettled_are_held(self) -> None:
        held = {m.id for m in self.buf.unsettled()}
        assert held == self.pending | self.inflight
        for mid in held:
            stored = self.buf.get(mid)
            assert stored is not None and (stored.seq, stored.text) == self.model[mid]

    @invariant()
    def holds_the_window_or_what_is_not_durable(self) -> None:
        """Past the window only messages a write still needs stay: durable ones are evicted,
        down to the window and no further."""
        busy = len(self.pending | self.inflight)
        assert len(self.buf) == min(len(self.model), max(3, busy))

    @invariant()
    def tail_is_contiguous_and_ordered(self) -> None:
        seqs = [m.seq for m in self.buf.recent()]
        assert seqs == sorted(seqs)

    @invariant()
    def recent_is_the_newest_held_by_seq(self) -> None:
        held = sorted(self.buf.checkpoint().messages, key=lambda m: m.seq or 0)
        assert self.buf.recent() == held and self.buf.recent(0) == []
        for limit in range(1, len(held) + 2):
            assert self.buf.recent(limit) == held[-limit:]


TestBufferMachine = BufferMachine.TestCase
TestBufferMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
