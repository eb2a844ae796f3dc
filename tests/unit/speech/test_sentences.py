"""What of a reply is read aloud (speech/sentences.py): prose in sentences, never code or
reasoning, the same whether the reply comes whole or in pieces."""

from __future__ import annotations

from inglenook.speech.sentences import SentenceStream, lead_in, speakable

REPLY = """<think>The user wants a greeting. I will not say this aloud.</think>Hello **there**!
See [the guide](https://example.com/guide). Here is the code:

```python
print("never read. not even this.")
```

## Next steps
- Install it.
- Run it. Then rest"""

SAID = ["Hello there!", "See the guide.", "Here is the code.", "Next steps.", "Install it.",
        "Run it.", "Then rest"]


def test_a_whole_reply_is_read_without_code_reasoning_or_marks() -> None:
    assert speakable(REPLY) == SAID


def test_a_streamed_reply_gives_the_same_sentences_in_any_pieces() -> None:
    for size in (1, 2, 3, 7, 50):
        stream = SentenceStream()
        out: list[str] = []
        for i in range(0, len(REPLY), size):
            out += stream.feed(REPLY[i:i + size])
        assert out + stream.finish() == SAID, size


def test_the_first_sentence_is_ready_before_the_line_ends() -> None:
    stream = SentenceStream()
    assert stream.feed("The first sentence is done. The sec") == ["The first sentence is done."]
    assert stream.feed("ond one") == []
    assert stream.finish() == ["The second one"]


def test_an_unclosed_think_block_is_never_read() -> None:
    assert speakable("Sure. <think>secret plans that go on and on") == ["Sure."]


def test_a_run_on_sentence_is_cut_so_speech_need_not_wait() -> None:
    pieces = speakable("word " * 300)
    assert len(pieces) > 1 and all(len(p) <= 401 for p in pieces)


def test_inline_triple_backticks_are_not_a_fence() -> None:
    assert speakable("Hello. ```x``` This is read.") == ["Hello.", "x This is read."]


def test_a_long_first_sentence_is_spoken_clause_first() -> None:
    long = "When the rain finally stopped, we walked down to the harbour to see the boats."
    assert lead_in(long) == ["When the rain finally stopped,",
                             "we walked down to the harbour to see the boats."]
    assert lead_in("Short and sweet.") == ["Short and sweet."]


def test_a_first_sentence_without_an_early_clause_is_spoken_a_few_words_first() -> None:
    """The first sound waits for its whole piece to be made: a few words, not a sentence."""
    assert lead_in("Please water the plants while I am away.") == [
        "Please water the plants", "while I am away."]  # before a phrase's first word
    assert lead_in("Our team finished the project a week before the deadline.") == [
        "Our team finished", "the project a week before the deadline."]
    assert lead_in("Could you bring a warm coat, because the evening will be cold?") == [
        "Could you bring a warm coat,", "because the evening will be cold?"]
    assert lead_in("An umbrella would be wise today.") == [
        "An umbrella would", "be wise today."]
    assert lead_in("Absolutely everything happened.") == ["Absolutely everything happened."]
