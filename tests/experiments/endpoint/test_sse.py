"""The event-stream parser (experiments/endpoint/sse.py): whole events only, whatever the chunking."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from luma.experiments.endpoint.sse import Parser

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=30)


def _stream(events: list[list[str]], newline: str) -> bytes:
    out = ""
    for lines in events:
        out += ": keep-alive" + newline
        out += "".join(f"data: {line}{newline}" for line in lines) + newline
    return out.encode()


def _parse(blob: bytes, cuts: list[int]) -> list[str]:
    p, got, last = Parser(), [], 0
    for c in sorted(set(c % (len(blob) + 1) for c in cuts)) + [len(blob)]:
        got += [e.data for e in p.feed(blob[last:c])]
        last = c
    return got + [e.data for e in p.close()]


@settings(max_examples=200, deadline=None)
@given(events=st.lists(st.lists(_text, min_size=1, max_size=3), max_size=6),
       newline=st.sampled_from(["\n", "\r\n", "\r"]), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_events_come_out_whole_whatever_the_chunking_and_line_ends(events, newline, cuts):
    blob = _stream(events, newline)
    assert _parse(blob, cuts) == ["\n".join(lines) for lines in events]


def test_openai_stream_with_done_and_event_types():
    p = Parser()
    blob = (b'data: {"choices":[{"text":"a"}]}\n\n'
            b"event: error\ndata: {\"error\": \"boom\"}\n\n"
            b"data: [DONE]\n\n")
    events = p.feed(blob[:7]) + p.feed(blob[7:])
    assert [e.type for e in events] == ["message", "error", "message"]
    assert [e.done for e in events] == [False, False, True]
    assert events[0].data == '{"choices":[{"text":"a"}]}'


def test_a_stream_cut_before_its_blank_line_still_gives_its_last_event():
    p = Parser()
    assert p.feed(b"data: x\r") == []  # a trailing CR may be half of CRLF
    assert [e.data for e in p.close()] == ["x"]
    assert p.close() == []


def test_utf8_split_across_chunks():
    blob = "data: naïve café\n\n".encode()
    p = Parser()
    got = [e.data for i in range(len(blob)) for e in p.feed(blob[i:i + 1])]
    assert got == ["naïve café"]
