"""Chat templates built in, for GGUF files that have none, and how one is chosen.

Many GGUF files carry no `tokenizer.chat_template` (base models, older or hand-made
conversions). A fixed fallback (ChatML) is wrong for most of them: a model whose vocabulary
has no `<|im_end|>` can never end its turn, prints the marker as text and runs on. So the
template is chosen from what the file has, as llama.cpp and Ollama do: the control tokens of
its vocabulary (Gemma's `<start_of_turn>`, Llama 3's header tokens, `[INST]`...), then its
architecture and tokenizer, then a plain-text format as the last resort.

Each template also names where a reply ends: the end of its turn and the start of the next
one. The engine stops there as well as at the model's end-of-generation tokens, also for a
file's own template when its family can be told (`family_of`), so a model that writes the
next turn's marker (or a marker its vocabulary lacks, as text) stops instead of running on.

The sources are written here (their shape follows the families' published formats); the
message text is printed as is, so core/template.py can tell it apart from the markup. Newlines
are printed as expressions: the sandbox trims the newline after a block tag.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

NL = "{{ '\\n' }}"
NL2 = "{{ '\\n\\n' }}"
# The system prompt(s), kept in `ns.system` and written into the first user turn (for formats
# without a system role): `{{ ns.system }}{% set ns.system = '' %}` where a user turn starts.
_SYSTEM_FIRST = ("{% set ns = namespace(system='') %}"
                 "{% for m in messages %}{% if m['role'] == 'system' %}"
                 "{% set ns.system = ns.system + m['content'] + '\\n\\n' %}"
                 "{% endif %}{% endfor %}")
_TAKE_SYSTEM = "{{ ns.system }}{% set ns.system = '' %}"
_NOT_SYSTEM = "{% for m in messages %}{% if m['role'] != 'system' %}"
_END_NOT_SYSTEM = "{% endif %}{% endfor %}"


@dataclass(frozen=True)
class Builtin:
    name: str  # as stored in settings and given to --template
    label: str  # as shown
    source: str  # Jinja
    # Texts where a reply ends: the end of the turn, the start of the next one. Stopped at as
    # text, and as tokens where the vocabulary has them as one token.
    ends: tuple[str, ...]


def _builtins() -> tuple[Builtin, ...]:
    chatml = ("{% for m in messages %}"
              "{{ '<|im_start|>' + m['role'] + '\\n' }}{{ m['content'] }}"
              "{{ '<|im_end|>\\n' }}{% endfor %}"
              "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
    gemma = ("{{ bos_token }}" + _SYSTEM_FIRST + _NOT_SYSTEM
             + "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}" + NL
             + "{% if m['role'] != 'assistant' %}" + _TAKE_SYSTEM + "{% endif %}"
             "{{ m['content'] }}<end_of_turn>" + NL + _END_NOT_SYSTEM
             + "{% if add_generation_prompt %}<start_of_turn>model" + NL + "{% endif %}")
    llama3 = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>"
              "{{ 'ipython' if m['role'] == 'tool' else m['role'] }}<|end_header_id|>" + NL2
              + "{{ m['content'] }}<|eot_id|>{% endfor %}"
              "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>"
              + NL2 + "{% endif %}")
    llama4 = ("{{ bos_token }}{% for m in messages %}<|header_start|>"
              "{{ 'ipython' if m['role'] == 'tool' else m['role'] }}<|header_end|>" + NL2
              + "{{ m['content'] }}<|eot|>{% endfor %}"
              "{% if add_generation_prompt %}<|header_start|>assistant<|header_end|>" + NL2
              + "{% endif %}")
    llama2 = ("{% set ns = namespace(system='', first=true) %}"
              "{% for m in messages %}{% if m['role'] == 'system' %}"
              "{% set ns.system = ns.system + '<<SYS>>\\n' + m['content'] + '\\n<</SYS>>\\n\\n' %}"
              "{% endif %}{% endfor %}" + _NOT_SYSTEM
              + "{% if m['role'] == 'assistant' %} {{ m['content'] }} {{ eos_token }}"
              "{% set ns.first = false %}{% else %}"
              "{% if not ns.first %}{{ bos_token }}{% endif %}[INST] " + _TAKE_SYSTEM
              + "{{ m['content'] }} [/INST]{% set ns.first = false %}{% endif %}"
              + _END_NOT_SYSTEM)
    mistral = ("{{ bos_token }}" + _SYSTEM_FIRST + _NOT_SYSTEM
               + "{% if m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}"
               "{% else %}[INST]" + _TAKE_SYSTEM + "{{ m['content'] }}[/INST]{% endif %}"
               + _END_NOT_SYSTEM)
    phi3 = ("{% for m in messages %}"
            "<|{{ 'user' if m['role'] == 'tool' else m['role'] }}|>" + NL
            + "{{ m['content'] }}<|end|>" + NL + "{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>" + NL + "{% endif %}")
    phi4 = ("{% for m in messages %}<|im_start|>{{ m['role'] }}<|im_sep|>"
            "{{ m['content'] }}<|im_end|>{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant<|im_sep|>{% endif %}")
    deepseek3 = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
                 "{{ m['content'] }}" + NL2 + "{% endif %}{% endfor %}" + _NOT_SYSTEM
                 + "{% if m['role'] == 'assistant' %}<｜Assistant｜>{{ m['content'] }}"
                 "<｜end▁of▁sentence｜>{% else %}<｜User｜>{{ m['content'] }}{% endif %}"
                 + _END_NOT_SYSTEM + "{% if add_generation_prompt %}<｜Assistant｜>{% endif %}")
    deepseek2 = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
                 "{{ m['content'] }}" + NL2 + "{% endif %}{% endfor %}" + _NOT_SYSTEM
                 + "{% if m['role'] == 'assistant' %}Assistant: {{ m['content'] }}"
                 "{{ eos_token }}{% else %}User: {{ m['content'] }}" + NL2 + "{% endif %}"
                 + _END_NOT_SYSTEM + "{% if add_generation_prompt %}Assistant:{% endif %}")
    plain = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }}" + NL2
             + "{% elif m['role'] == 'assistant' %}ASSISTANT: {{ m['content'] }}" + NL
             + "{% else %}USER: {{ m['content'] }}" + NL + "{% endif %}{% endfor %}"
             "{% if add_generation_prompt %}ASSISTANT:{% endif %}")
    return (
        Builtin("chatml", "ChatML", chatml, ("<|im_end|>", "<|im_start|>")),
        Builtin("gemma", "Gemma", gemma, ("<end_of_turn>", "<start_of_turn>")),
        Builtin("llama3", "Llama 3", llama3, ("<|eot_id|>", "<|start_header_id|>")),
        Builtin("llama4", "Llama 4", llama4, ("<|eot|>", "<|header_start|>")),
        Builtin("mistral", "Mistral", mistral, ("</s>", "[INST]")),
        Builtin("llama2", "Llama 2", llama2, ("</s>", "[INST]")),
        Builtin("phi3", "Phi 3", phi3, ("<|end|>", "<|user|>")),
        Builtin("phi4", "Phi 4", phi4, ("<|im_end|>", "<|im_start|>")),
        Builtin("deepseek3", "DeepSeek V3 / R1", deepseek3,
                ("<｜end▁of▁sentence｜>", "<｜User｜>")),
        Builtin("deepseek2", "DeepSeek V2", deepseek2, ("<｜end▁of▁sentence｜>", "\nUser:")),
        # A base model writes the transcript on: the next line of either side ends the reply.
        Builtin("plain", "Plain text (USER: / ASSISTANT:)", plain,
                ("\nUSER:", "\nASSISTANT:")),
    )


BUILTINS: dict[str, Builtin] = {b.name: b for b in _builtins()}
AUTOMATIC, FILE_OWN = "auto", "file"  # the other values of LoadParams.template_name
TEMPLATE_NAMES: tuple[str, ...] = (AUTOMATIC, FILE_OWN, *BUILTINS)
CHATML_TEMPLATE = BUILTINS["chatml"].source

# What in a vocabulary chooses a template, most specific first (Phi 4 before ChatML: it has
# ChatML's tokens too). Every token named must be one token of the vocabulary.
_BY_TOKENS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gemma", ("<start_of_turn>", "<end_of_turn>")),
    ("llama4", ("<|header_start|>", "<|header_end|>", "<|eot|>")),
    ("llama3", ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")),
    ("deepseek3", ("<｜User｜>", "<｜Assistant｜>")),
    ("phi4", ("<|im_start|>", "<|im_sep|>", "<|im_end|>")),
    ("chatml", ("<|im_start|>", "<|im_end|>")),
    ("phi3", ("<|user|>", "<|assistant|>", "<|end|>")),
    ("mistral", ("[INST]", "[/INST]")),
    ("deepseek2", ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")),
)


@dataclass(frozen=True)
class Detected:
    name: str  # a BUILTINS key
    reason: str  # "chosen from its <start_of_turn> and <end_of_turn> tokens"


def _listed(texts: tuple[str, ...]) -> str:
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]


# Words in a file's name or fine-tune that say it was tuned to chat (Qwen2.5-7B-Instruct,
# gemma-3-270m-it, Llama-2-7b-chat, Hermes...).
_TUNED = re.compile(r"instruct|chat|(?:^|[-_ .])it(?:$|[-_ .])|sft|dpo|rlhf|orpo|hermes|"
                    r"assistant|distill|tulu|zephyr|vicuna", re.IGNORECASE)
_BASE = re.compile(r"^(?:base|pt|pretrain(?:ed)?)$", re.IGNORECASE)


def is_base_model(metadata: Mapping[str, object], file_name: str = "") -> bool:
    """Whether a file (one without a chat template) looks like a base model: its metadata
    names no fine-tune (general.finetune, as llama.cpp's converter writes it), or names
    "base", and neither its name nor its file's says it was tuned to chat. Base models have
    not learnt their family's chat tokens (those are trained in fine-tuning): Gemma 3 270M
    base, given Gemma's <start_of_turn> turns, repeats the question for ever; given a plain
    USER:/ASSISTANT: transcript, it answers and starts the next USER: line."""
    finetune = metadata.get("general.finetune")
    if isinstance(finetune, str) and finetune.strip() and not _BASE.match(finetune.strip()):
        return False
    names = [metadata.get("general.name"), metadata.get("general.basename"), file_name]
    return not any(isinstance(n, str) and _TUNED.search(n) for n in names)


def detect(has_token: Callable[[str], bool], architecture: str = "", tokenizer: str = "",
           base: bool = False) -> Detected:
    """The built-in template for a file without one. `has_token(text)`: the vocabulary has
    `text` as one token; `architecture`, `tokenizer`: general.architecture and
    tokenizer.ggml.model ("llama" is SentencePiece); `base`: is_base_model."""
    found = None
    for name, tokens in _BY_TOKENS:
        if all(map(has_token, tokens)):
            found = Detected(name, f"chosen from its {_listed(tokens)} tokens")
            break
    else:
        if architecture in ("llama", "mistral") and tokenizer == "llama" and has_token("</s>"):
            # Llama 2 and the first Mistrals write [INST] as text: only the family tells.
            found = Detected("llama2", f"chosen from its architecture ({architecture}) and "
                                       "SentencePiece vocabulary")
    if base:
        family = f" (its vocabulary is {BUILTINS[found.name].label}'s)" if found else ""
        return Detected("plain", f"chosen for a base model{family}: its metadata names no "
                                 "fine-tune, and base models continue a plain transcript")
    return found or Detected("plain", "its vocabulary has no chat tokens of a known format")


def family_of(source: str) -> str | None:
    """The built-in format a template's source is written in (the file's own or an override),
    by the markers it writes, as llama.cpp's llm_chat_detect_template reads them; None when
    it is none of them (then only the model's end-of-generation tokens end a reply)."""
    def has(*texts: str) -> bool:
        return all(t in source for t in texts)

    if has("<|im_start|>"):
        return "phi4" if has("<|im_sep|>") else "chatml"
    if has("[INST]"):
        return "llama2" if has("<<SYS>>") else "mistral"
    if has("<|assistant|>", "<|end|>"):
        return "phi3"
    if has("<start_of_turn>"):
        return "gemma"
    if has("<|start_header_id|>", "<|end_header_id|>"):
        return "llama3"
    if has("<|header_start|>", "<|header_end|>"):
        return "llama4"
    if has("<｜Assistant｜>", "<｜User｜>"):
        return "deepseek3"
    if has("'Assistant: ' + message['content'] + eos_token"):
        return "deepseek2"
    if has("USER: ", "ASSISTANT: "):
        return "plain"
    return None


def reply_ends(source: str, name: str = "") -> tuple[str, ...]:
    """Where a reply in this template ends (Builtin.ends): a built-in's own, else its
    family's; () when the family cannot be told."""
    family = name if name in BUILTINS else family_of(source)
    return BUILTINS[family].ends if family is not None else ()


@dataclass(frozen=True)
class Choice:
    """The template a model loads with. `source`: "gguf" (the file's own), "override" (Jinja
    given in Defaults for this model), "chosen" (a built-in named there or with --template),
    "detected" (a built-in chosen from the file, which has none)."""

    source: str
    kind: str
    name: str = ""  # the built-in's key, for chosen and detected
    reason: str = ""  # why, for detected

    @property
    def label(self) -> str:
        return BUILTINS[self.name].label if self.name in BUILTINS else ""

    @property
    def ends(self) -> tuple[str, ...]:
        return reply_ends(self.source, self.name)


def choose(file_template: str | None, override: str | None, template_name: str,
           detected: Callable[[], Detected]) -> Choice:
    """Custom Jinja wins; then a built-in named by the user; then the file's own; else one
    chosen from the file (`detected`, asked only then)."""
    if override and override.strip():
        return Choice(override, "override")
    if template_name in BUILTINS:
        return Choice(BUILTINS[template_name].source, "chosen", template_name)
    if file_template and file_template.strip():
        return Choice(file_template, "gguf")
    found = detected()
    return Choice(BUILTINS[found.name].source, "detected", found.name, found.reason)


def describe(kind: str, label: str = "", reason: str = "") -> str:
    """What a model's template is, in a sentence (the load notice, the model's tooltip)."""
    if kind == "detected":
        return f"No chat template in the file: using {label}, {reason}."
    if kind == "chosen":
        return f"Using the built-in {label} chat template (Defaults for this model)."
    if kind == "override":
        return "Using your own chat template (Defaults for this model)."
    if kind == "chatml":  # older versions' fallback, in records of replies
        return "No chat template in the file: using ChatML."
    return "Using the chat template in the model file."


def short(kind: str, label: str = "") -> str:
    """The same in a few words, for a reply's Details."""
    return {"gguf": "from the model file", "override": "your override",
            "chatml": "ChatML (the file has none)",
            "detected": f"{label}, built in (the file has none)",
            "chosen": f"{label}, built in (your choice)"}.get(kind, kind)
