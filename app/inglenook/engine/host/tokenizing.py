"""Prompts to tokens, so that only the chat template's markup can produce control tokens (see
core/template.py), and tokens back to text.

Markup is read with special tokens on, message text with them off, and the plain text between
two control tokens is tokenized as one piece, exactly as llama.cpp reads a whole prompt, so an
ordinary conversation gets the same tokens as before.
"""

from __future__ import annotations

import codecs
import dataclasses
from collections.abc import Collection, Iterator, Sequence

from inglenook.core.context import Fit, fit_messages, policy_of, reply_reserve
from inglenook.core.messages import GenerationRequest, ImageRef, Message, RawPrompt
from inglenook.core.reasoning import ReasoningFormat
from inglenook.core.template import (
    IMAGE_MARK,
    ControlStrings,
    RenderedPrompt,
    Segment,
    TemplateContext,
    TemplateError,
    defuse,
)
from inglenook.engine import protocol as p
from inglenook.engine.host.grammar import RequestRefused
from inglenook.engine.host.llama import (
    ATTR_CONTROL,
    ATTR_LSTRIP,
    ATTR_RSTRIP,
    ATTR_USER_DEFINED,
    Model,
)
from inglenook.engine.host.vision import ImageError, Vision, is_placeholder
from inglenook.engine.kv_states import common_prefix, pack
from inglenook.engine.template_process import TemplateRenderer

# A reply continued from its text (GenerationRequest.prefill) keeps its reasoning tags as tags.
_TAGS = frozenset(t for kind in ("think", "bracket") for f in [ReasoningFormat(kind)]
                  for t in (f.open, f.close))
PREFIX_MIN_CHARS = 600  # a system prompt shorter than this cannot be MIN_PREFIX_TOKENS long
_C_SPACE = b" \t\n\v\f\r"  # what C's isspace() strips next to an lstrip/rstrip token


class Tokenizer:
    """`markers`: texts the window reads replies by (reasoning channels, tool-call tags). Where
    the model writes one as a control token, which plain detokenizing drops, its text is kept
    in the reply; prompts still read such text from markup only (tokenize_prompt)."""

    def __init__(self, model: Model, template: TemplateRenderer,
                 markers: Collection[str] = (), ends: Sequence[str] = ()) -> None:
        self.model = model
        self.template = template
        # Where a chat reply ends besides the model's end-of-generation tokens: the template's
        # end of turn and next turn (builtin_templates.Builtin.ends), as text and, where the
        # vocabulary has one as a single token, as that token.
        self.end_texts = tuple(ends)
        self.end_tokens = frozenset(model.tokenize(t.encode(), special=True)[0]
                                    for t in ends if has_token(model, t))
        self._pieces: dict[int, bytes] = {}
        self.vision: Vision | None = None  # the projector, when the model was loaded with one
        self._system_probes: dict[str, bytes] = {}
        self._markup, self.control = self._control_tokens()
        self._prefill_control = ControlStrings(
            in_plain_text=[t for t in self.control.texts[1] if t not in _TAGS])
        for token, (raw, attr) in self._markup.items():
            if attr & ATTR_CONTROL and raw.decode("utf-8") in markers:
                self._pieces[token] = model.piece(token, special=True)  # what piece(token) gives

    def _control_tokens(self) -> tuple[dict[int, tuple[bytes, int]], ControlStrings]:
        """The tokens only markup may produce ({id: (text, attributes)}) and their texts.

        Control and unknown tokens, plus the user-defined tokens that the template writes:
        llama.cpp reads user-defined tokens even in plain text, and some models mark markup
        that way (gpt-oss's `<|start|>`, `<|message|>`, `<|channel|>`)."""
        markup: dict[int, tuple[bytes, int]] = {}
        every, in_plain_text = [], []
        for token in range(self.model.n_vocab):
            attr = self.model.attr(token)
            if not attr & (ATTR_CONTROL | ATTR_USER_DEFINED):
                continue
            raw = self.model.text(token)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue  # cannot occur in text, so nothing to find or defuse
            if not text:
                continue
            if attr & ATTR_CONTROL:
                every.append(text)
            elif text in self.template.source:
                every.append(text)
                in_plain_text.append(text)
            else:
                continue
            markup[token] = (raw, attr)
        return markup, ControlStrings(every, in_plain_text)

    def piece(self, token: int) -> bytes:
        cached = self._pieces.get(token)
        if cached is None:
            cached = self._pieces[token] = self.model.piece(token)
        return cached

    def special_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.model.piece(token, special=True).decode("utf-8", errors="replace")

    def render(self, messages: Sequence[Message],
               context: TemplateContext | None = None) -> RenderedPrompt:
        """An image is IMAGE_MARK before its message's text (which cannot contain one)."""
        images = tuple(ref for m in messages for ref in m.images)
        if images and self.vision is None:
            raise ImageError("This model cannot see images: load it with its vision "
                             "projector (an mmproj .gguf).")
        if not images and not any(IMAGE_MARK in m.content for m in messages):
            return self.template.render_prompt(messages, control=self.control, context=context)
        marked = [dataclasses.replace(m, content=IMAGE_MARK * len(m.images)
                                      + m.content.replace(IMAGE_MARK, "\ufffd"))
                  for m in messages]
        prompt = self.template.render_prompt(marked, control=self.control, context=context)
        return dataclasses.replace(prompt, images=images)

    def _with_images(self, prompt: RenderedPrompt) -> Iterator[Segment | ImageRef]:
        """The prompt's segments, split where its images are."""
        images = iter(prompt.images)
        found = 0
        for segment in prompt.segments:
            pieces = segment.text.split(IMAGE_MARK)
            for k, piece in enumerate(pieces):
                if k:
                    found += 1
                    ref = next(images, None)
                    if ref is None:
                        break
                    yield ref
                if piece:
                    yield Segment(piece, segment.from_message)
        if found != len(prompt.images):
            raise ImageError("The chat template dropped or repeated an image of the "
                             "conversation.")

    def fit(self, request: GenerationRequest, n_ctx: int
            ) -> tuple[RenderedPrompt, list[int], Fit]:
        """The prompt for a request, history left out under its overflow policy until it fits
        `n_ctx`, its tokens, and what was left out."""
        rendered: dict[tuple[Message, ...], tuple[RenderedPrompt, list[int]]] = {}
        context = TemplateContext(request.tools, request.enable_thinking,
                                  request.reasoning_effort)
        raw = request.raw

        def count_tokens(messages: Sequence[Message]) -> int:
            if raw is not None:  # one text, continued as it is
                prompt = RenderedPrompt((Segment(raw.prefix + raw.suffix, True),))
                rendered[tuple(messages)] = prompt, self.raw_tokens(raw)
            else:
                prompt = self._prefilled(self.render(messages, context), request.prefill)
                rendered[tuple(messages)] = prompt, self.tokenize_prompt(prompt)
            return len(rendered[tuple(messages)][1])

        policy = policy_of("stop" if raw is not None else request.overflow)
        fit = fit_messages(request.messages, count_tokens, n_ctx,
                           reply_reserve(n_ctx, request.sampling.max_tokens, policy), policy)
        prompt, tokens = rendered.get(fit.messages) or (
            self._prefilled(self.render(fit.messages, context), request.prefill), [])
        return prompt, tokens or self.tokenize_prompt(prompt), fit

    def _prefilled(self, prompt: RenderedPrompt, prefill: str) -> RenderedPrompt:
        """The prompt with the reply so far after its generation prompt, as message text (it
        cannot produce control tokens, nor the markup tokens llama.cpp reads in plain text,
        save reasoning tags), so that the model continues it. It may have been edited."""
        if not prefill:
            return prompt
        text = defuse(prefill, self._prefill_control.in_plain_text)
        return dataclasses.replace(prompt, segments=(*prompt.segments, Segment(text, True)))

    def raw_tokens(self, raw: RawPrompt) -> list[int]:
        """A plain completion's tokens: the text as plain text (never control tokens), or with
        a suffix the model's fill-in-the-middle layout, as llama.cpp's server builds it:
        [BOS] FIM_PRE prefix FIM_SUF suffix FIM_MID."""
        model = self.model
        head = [model.bos] if model.add_bos else []

        def plain(text: str) -> list[int]:
            return model.tokenize(text.encode("utf-8", errors="replace"), special=False)

        if not raw.suffix:
            return head + plain(raw.prefix)
        pre, suf, mid = model.fim
        if min(pre, suf, mid) < 0:
            raise RequestRefused("'suffix' needs a model with fill-in-the-middle tokens, and "
                                 "this one's vocabulary has none: leave it out.")
        return [*head, pre, *plain(raw.prefix), suf, *plain(raw.suffix), mid]

    def tokenize(self, messages: Sequence[Message]) -> list[int]:
        return self.tokenize_prompt(self.render(messages))

    def tokenize_prompt(self, prompt: RenderedPrompt) -> list[int]:
        """Markup is read with special tokens on; each control token found there splits the
        prompt, and the plain text between two of them (markup and message text together) is
        tokenized with special tokens off, as one piece: llama.cpp tokenizes each stretch
        between special tokens on its own, so this gives the tokens of the whole prompt read at
        once, except that message text cannot produce control tokens."""
        bos = self.model.bos
        tokens = [bos] if self.model.add_bos else []
        run: list[tuple[bytes, bool]] = []  # (text, from a message) since the last control token
        before = 0  # attributes of that control token
        for segment in self._with_images(prompt):
            if isinstance(segment, ImageRef):  # an image ends the plain text before it
                assert self.vision is not None
                tokens += self._plain(run, before, 0)
                run, before = [], 0
                tokens += self.vision.tokens(segment)
                continue
            data = segment.text.encode("utf-8", errors="replace")
            if segment.from_message:
                run.append((data, True))
                continue
            pos = 0
            for token in self.model.tokenize(data, special=True):
                found = self._markup.get(token)
                at = data.find(found[0], pos) if found else -1
                if found is None or at < 0:
                    continue  # plain text; a control token not found as text: left to _plain
                run.append((data[pos:at], False))
                tokens += self._plain(run, before, found[1])
                tokens.append(token)
                run, before, pos = [], found[1], at + len(found[0])
            run.append((data[pos:], False))
        tokens += self._plain(run, before, 0)
        # Templates that write the BOS text themselves would otherwise give two BOS tokens.
        if len(tokens) > 1 and tokens[0] == tokens[1] == bos:
            tokens = tokens[1:]
        return tokens

    def _plain(self, run: list[tuple[bytes, bool]], before: int, after: int,
               again: bool = True) -> list[int]:
        text = b"".join(data for data, _ in run)
        if before & ATTR_RSTRIP:  # llama.cpp drops the whitespace these tokens say to
            text = text.lstrip(_C_SPACE)
        if after & ATTR_LSTRIP:
            text = text.rstrip(_C_SPACE)
        if not text:
            return []
        tokens = self.model.tokenize(text, special=False)
        if again and any(from_message for _, from_message in run) and any(
                t in self._markup for t in tokens):
            # Plain text merged into a control token (a vocabulary whose merges can spell one):
            # read it again with the control strings in message text defused.
            run = [(defuse(d.decode("utf-8", errors="replace"), self.control.every).encode()
                    if m else d, m) for d, m in run]
            return self._plain(run, before, after, again=False)
        return tokens

    def system_prefix(self, messages: Sequence[Message], tokens: list[int]) -> int:
        """How many leading tokens of a prompt are its system prompt's (and the markup after
        it that any conversation would share); 0 for a short one, or when it cannot be told."""
        if not messages or messages[0].role != "system" or len(
                messages[0].content) < PREFIX_MIN_CHARS:
            return 0
        probe = self._system_probes.get(messages[0].content)
        if probe is None:
            try:  # a stand-in first message: some templates refuse a system prompt alone
                probe = pack(self.tokenize([messages[0], Message("user", "\u2026")]))
            except TemplateError:
                probe = b""
            if len(self._system_probes) > 32:
                self._system_probes.clear()
            self._system_probes[messages[0].content] = probe
        return common_prefix(probe, pack(tokens))

    def view(self, request_id: int, prompt: RenderedPrompt, tokens: list[int], fit: Fit,
             n_ctx: int) -> p.PromptView:
        """The prompt as the model sees it: its text and every token. A character whose bytes
        span several tokens is shown with the token that completes it, so the pieces add up to
        the text. Each image is one mark where it starts (found by its first placeholder, so
        that two images side by side are two)."""
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        labels = self.vision.labels(prompt.images) if self.vision is not None else {}
        marks = _image_marks(tokens, labels)
        shown = tuple(p.PromptToken(t, marks.get(i, "") if is_placeholder(t) else
                                    utf8.decode(self.model.piece(t, special=True)),
                                    t in self._markup or t < 0)
                      for i, t in enumerate(tokens))
        text = "".join(t.piece for t in shown) + utf8.decode(b"", final=True)
        return p.PromptView(request_id, text, shown, n_ctx=n_ctx,
                            dropped_messages=fit.dropped, defused=prompt.defused,
                            dropped_start=fit.dropped_start,
                            image_positions=sum(map(is_placeholder, tokens)))


def has_token(model: Model, text: str) -> bool:
    """The vocabulary has `text` as one token (a control or user-defined one, as markup)."""
    tokens = model.tokenize(text.encode("utf-8"), special=True)
    return len(tokens) == 1 and model.text(tokens[0]) == text.encode("utf-8")


def _image_marks(tokens: Sequence[int], labels: dict[int, str]) -> dict[int, str]:
    """Where each image chunk's placeholder positions start, and what the inspector shows there:
    "[image 1: 576 tokens]" (the chunk's other positions show nothing). `labels`: by a chunk's
    first id (Vision.labels)."""
    marks: dict[int, str] = {}
    start, label = -1, ""
    for i, t in enumerate([*tokens, 0]):
        if start >= 0 and (not is_placeholder(t) or t in labels):
            marks[start] = f"[{label}: {i - start} tokens]"
            start = -1
        if is_placeholder(t) and start < 0:
            start, label = i, labels.get(t, f"image {len(marks) + 1}")
    return marks
