import pytest

from inglenook.core.streaming import StopMatcher, Utf8Stream

TEXT = "héllo 🌍 中文 שלום e\u0301 👩‍👧"


def test_byte_by_byte_equals_whole() -> None:
    stream = Utf8Stream()
    pieces = [stream.feed(bytes([b])) for b in TEXT.encode()]
    assert "".join(pieces) + stream.flush() == TEXT
    assert all("\ufffd" not in p for p in pieces)


@pytest.mark.parametrize("split", range(len(TEXT.encode()) + 1))
def test_every_split_point(split: int) -> None:
    data = TEXT.encode()
    stream = Utf8Stream()
    assert stream.feed(data[:split]) + stream.feed(data[split:]) + stream.flush() == TEXT


def test_incomplete_character_is_held_back() -> None:
    stream = Utf8Stream()
    assert stream.feed("a🌍".encode()[:3]) == "a"
    assert stream.feed("🌍".encode()[2:]) == "🌍"


def test_invalid_bytes_become_replacement_character() -> None:
    stream = Utf8Stream()
    assert stream.feed(b"ok \xff\xfe!") == "ok \ufffd\ufffd!"
    assert stream.feed(b"\xc3") == ""
    assert stream.feed(b"(") == "\ufffd("  # a lead byte not followed by a continuation byte
    assert stream.feed("中".encode()[:2]) == ""
    assert stream.flush() == "\ufffd"  # reply ended mid-character


def run(matcher: StopMatcher, deltas: list[str]) -> tuple[list[str], bool]:
    shown = []
    for delta in deltas:
        text, stopped = matcher.feed(delta)
        shown.append(text)
        if stopped:
            return shown, True
    shown.append(matcher.flush())
    return shown, False


def test_no_stops_is_pass_through() -> None:
    matcher = StopMatcher([])
    assert matcher.feed("<|im") == ("<|im", False)
    assert matcher.flush() == ""
    assert StopMatcher([""]).feed("x") == ("x", False)


def test_stop_string_spanning_deltas() -> None:
    shown, stopped = run(StopMatcher(["<|im_end|>"]), ["Hello", " world<|", "im_", "end|>", "more"])
    assert stopped
    assert shown == ["Hello", " world", "", ""]


def test_partial_match_that_is_not_a_stop_is_emitted() -> None:
    matcher = StopMatcher(["<|im_end|>"])
    assert matcher.feed("a <|im") == ("a ", False)
    assert matcher.feed("_start") == ("<|im_start", False)
    assert matcher.feed(" <") == (" ", False)
    assert matcher.flush() == "<"  # the reply ended: what was held back is shown after all


def test_stop_at_very_start() -> None:
    matcher = StopMatcher(["User:"])
    assert matcher.feed("User: hi") == ("", True)
    assert matcher.feed("anything") == ("", True)
    assert matcher.flush() == ""


def test_text_after_stop_in_same_delta_is_dropped() -> None:
    assert StopMatcher(["\n\n"]).feed("done.\n\nUser: next") == ("done.", True)


def test_overlapping_prefixes_cut_at_the_earliest_complete_stop() -> None:
    stops = ["</s>", "</step>", "<|end|>", "<|endoftext|>"]
    shown, stopped = run(StopMatcher(stops), ["a</s", "t", "ep", ">b"])
    assert stopped and "".join(shown) == "a"
    shown, stopped = run(StopMatcher(stops), ["x<|end", "oftext|>"])
    assert stopped and "".join(shown) == "x"
    shown, stopped = run(StopMatcher(stops), ["x<|end", "|>"])
    assert stopped and "".join(shown) == "x"
    shown, stopped = run(StopMatcher(stops), ["x</st", "rong>"])
    assert not stopped and "".join(shown) == "x</strong>"


def test_stop_that_overlaps_itself() -> None:
    # "aab": after "aaa" the last two chars could still start it.
    matcher = StopMatcher(["aab"])
    assert matcher.feed("aaa") == ("a", False)
    assert matcher.feed("ab") == ("a", True)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_chunking_does_not_change_the_result(size: int) -> None:
    text = "one <tw<two> three <stop> four"
    deltas = [text[i:i + size] for i in range(0, len(text), size)]
    shown, stopped = run(StopMatcher(["<stop>", "<two>x"]), deltas)
    assert stopped
    assert "".join(shown) == "one <tw<two> three "
