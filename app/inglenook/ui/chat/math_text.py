"""TeX math from model output as rich text a QTextDocument shows: Unicode symbols, italic
variables, `<sup>`/`<sub>` for scripts, a fraction as a⁄b, a root with an overline. No image,
no font, no resource: the formula is text like the rest of the message (selectable, copied as
its source by Copy, coloured by the theme, zoomed with it).

Hostile input stays cheap and inert: nothing is expanded (no macros: a formula with `\\def`,
`\\newcommand` or `\\input` is shown as written), a formula longer than MAX_CHARS, nested
deeper than MAX_DEPTH or with a command not known here is shown as its source, and every
character of the output is escaped. Qt-free.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from markdown_it.common.utils import escapeHtml

MAX_CHARS = 4_000
MAX_DEPTH = 24
_TOKEN = re.compile(r"\\[A-Za-z]+\*?|\\.|[{}^_&]|\s+|.", re.DOTALL)



def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


SYMBOLS = {
    # Greek
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ϵ", "varepsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "vartheta": "ϑ", "iota": "ι", "kappa": "κ",
    "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "pi": "π", "varpi": "ϖ", "rho": "ρ",
    "varrho": "ϱ", "sigma": "σ", "varsigma": "ς", "tau": "τ", "upsilon": "υ", "phi": "ϕ",
    "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ",
    "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π", "Sigma": "Σ", "Upsilon": "Υ",
    "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
    # operators and relations
    "times": "×", "cdot": "⋅", "div": "÷", "pm": "±", "mp": "∓", "ast": "∗", "star": "⋆",
    "circ": "∘", "bullet": "•", "oplus": "⊕", "otimes": "⊗", "leq": "≤", "le": "≤",
    "geq": "≥", "ge": "≥", "neq": "≠", "ne": "≠", "approx": "≈", "equiv": "≡", "sim": "∼",
    "simeq": "≃", "cong": "≅", "propto": "∝", "ll": "≪", "gg": "≫", "in": "∈", "notin": "∉",
    "ni": "∋", "subset": "⊂", "subseteq": "⊆", "supset": "⊃", "supseteq": "⊇", "cup": "∪",
    "cap": "∩", "setminus": "∖", "emptyset": "∅", "varnothing": "∅", "forall": "∀",
    "exists": "∃", "neg": "¬", "lnot": "¬", "land": "∧", "wedge": "∧", "lor": "∨", "vee": "∨",
    "to": "→", "rightarrow": "→", "leftarrow": "←", "gets": "←", "Rightarrow": "⇒",
    "Leftarrow": "⇐", "leftrightarrow": "↔", "Leftrightarrow": "⇔", "iff": "⟺",
    "implies": "⟹", "mapsto": "↦", "uparrow": "↑", "downarrow": "↓", "perp": "⊥",
    "parallel": "∥", "mid": "∣", "angle": "∠", "triangle": "△", "nabla": "∇",
    "partial": "∂", "infty": "∞", "hbar": "ℏ", "ell": "ℓ", "Re": "ℜ", "Im": "ℑ",
    "aleph": "ℵ", "prime": "′", "degree": "°", "sum": "∑", "prod": "∏", "coprod": "∐",
    "int": "∫", "iint": "∬", "iiint": "∭", "oint": "∮", "bigcup": "⋃", "bigcap": "⋂",
    "cdots": "⋯", "ldots": "…", "dots": "…", "dotsc": "…", "dotsb": "⋯", "vdots": "⋮",
    "ddots": "⋱", "langle": "⟨", "rangle": "⟩", "lfloor": "⌊", "rfloor": "⌋", "lceil": "⌈",
    "rceil": "⌉", "lvert": "|", "rvert": "|", "vert": "|", "Vert": "‖", "lVert": "‖",
    "rVert": "‖", "|": "‖", "checkmark": "✓",
    # spacing and escaped characters
    "quad": "\u2003", "qquad": "\u2003\u2003", ",": "\u2009", ":": "\u2005", ";": "\u2004",
    ">": "\u2005", " ": " ", "!": "", "{": "{", "}": "}", "%": "%", "$": "$", "&": "&",
    "#": "#", "_": "_", "\\": "\n",
}
FUNCTIONS = _words(
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh coth log ln lg exp lim "
    "liminf limsup max min sup inf det gcd lcm deg dim ker arg Pr mod bmod hom")
ACCENTS = {"hat": "\u0302", "widehat": "\u0302", "tilde": "\u0303", "widetilde": "\u0303",
           "vec": "\u20d7", "dot": "\u0307", "ddot": "\u0308", "acute": "\u0301",
           "grave": "\u0300", "check": "\u030c", "breve": "\u0306"}
SIZERS = _words("left right big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr Biggl Biggr "
                "middle displaystyle textstyle scriptstyle limits nolimits")
RELATIONS = frozenset("=<>≤≥≠≈≡∼≃≅∝∈∉⊂⊆⊃⊇→←⇒⇐↔⇔⟺⟹↦")
_DOUBLE = {c: chr(0x1D538 + i) for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")}
_DOUBLE.update({"C": "ℂ", "H": "ℍ", "N": "ℕ", "P": "ℙ", "Q": "ℚ", "R": "ℝ", "Z": "ℤ"})
_SCRIPT = {c: chr(0x1D49C + i) for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")}
_SCRIPT.update({"B": "ℬ", "E": "ℰ", "F": "ℱ", "H": "ℋ", "I": "ℐ", "L": "ℒ", "M": "ℳ",
                "R": "ℛ"})
FENCES = {"matrix": ("", ""), "pmatrix": ("(", ")"), "bmatrix": ("[", "]"),
          "Bmatrix": ("{", "}"), "vmatrix": ("|", "|"), "Vmatrix": ("‖", "‖"),
          "cases": ("{", "")}


class Unshown(Exception):
    """The formula is shown as its source: too long, too deep, or a command not known here."""


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = [t for t in _TOKEN.findall(source)]
        self.pos = 0

    def peek(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ""

    def take(self) -> str:
        token = self.peek()
        self.pos += 1
        return token

    def skip_space(self) -> None:
        while self.peek().isspace() and self.peek():
            self.pos += 1

    def sequence(self, depth: int, until: str = "") -> str:
        """Atoms with their scripts up to `until` (taken) or the end."""
        if depth > MAX_DEPTH:
            raise Unshown
        out: list[str] = []
        while self.pos < len(self.tokens):
            token = self.peek()
            if token == until or (until == "}" and token == "\\end"):
                if token == until and until != "\\end":
                    self.pos += 1
                return "".join(out)
            if token == "}":  # a stray closing brace
                self.pos += 1
                continue
            if token in ("^", "_"):
                out.append("")  # a script with nothing before it
            else:
                out.append(self.atom(depth))
            while self.peek() in ("^", "_") or (self.peek().isspace() and self.peek()
                                                and self._script_follows()):
                self.skip_space()
                tag = "sup" if self.take() == "^" else "sub"
                self.skip_space()
                out.append(f"<{tag}>{self.atom(depth + 1)}</{tag}>")
        return "".join(out)

    def _script_follows(self) -> bool:
        k = self.pos
        while k < len(self.tokens) and self.tokens[k].isspace():
            k += 1
        return k < len(self.tokens) and self.tokens[k] in ("^", "_")

    def argument(self, depth: int) -> str:
        self.skip_space()
        if self.peek() == "{":
            self.pos += 1
            return self.sequence(depth + 1, "}")
        return self.atom(depth + 1) if self.peek() else ""

    def raw_argument(self) -> str:
        """A braced argument as its text ({…} of \\text, \\begin)."""
        self.skip_space()
        if self.peek() != "{":
            return self.take() if self.peek() else ""
        self.pos += 1
        level, parts = 1, []
        while self.pos < len(self.tokens):
            token = self.take()
            level += (token == "{") - (token == "}")
            if level == 0:
                break
            parts.append(token[1:] if token in ("\\{", "\\}", "\\$", "\\%", "\\&") else token)
        return "".join(parts)

    def atom(self, depth: int) -> str:
        if depth > MAX_DEPTH:
            raise Unshown
        token = self.take()
        if token == "{":
            return self.sequence(depth + 1, "}")
        if token.isspace():
            return ""
        if token == "&":
            return "\u2003"
        if token.startswith("\\") and len(token) > 1:
            return self.command(token[1:].rstrip("*"), depth)
        if token.isalpha():
            return f"<i>{escapeHtml(token)}</i>"
        if token == "-":
            token = "−"
        if token in RELATIONS or token in "+−":
            return f"\u2009{escapeHtml(token)}\u2009"
        if token == "'":
            return "′"
        return escapeHtml(token)

    def command(self, name: str, depth: int) -> str:
        if name in SIZERS:
            self.skip_space()
            if self.peek() == ".":
                self.pos += 1
            return ""
        symbol = SYMBOLS.get(name)
        if symbol is not None:
            if symbol == "\n":
                return "<br>"
            if symbol in RELATIONS or name in ("times", "cdot", "div", "pm", "mp"):
                return f"\u2009{escapeHtml(symbol)}\u2009"
            return escapeHtml(symbol)
        if name in FUNCTIONS:
            return f"{name}\u2009"
        return self._structure(name, depth)

    def _structure(self, name: str, depth: int) -> str:
        styled: dict[str, Callable[[str], str]] = {
            "mathbf": lambda s: f"<b>{s}</b>", "boldsymbol": lambda s: f"<b>{s}</b>",
            "bm": lambda s: f"<b>{s}</b>", "mathit": lambda s: f"<i>{s}</i>",
            "mathrm": _upright, "operatorname": lambda s: _upright(s) + "\u2009",
            "mathsf": _upright, "mathtt": lambda s: f"<tt>{_upright(s)}</tt>",
            "overline": _overline, "bar": _overline, "underline": lambda s: f"<u>{s}</u>",
            "boxed": lambda s: f"[{s}]",
        }
        if name in ("text", "textrm", "textit", "textbf", "mbox", "mathnormal"):
            text = escapeHtml(self.raw_argument())
            return f"<b>{text}</b>" if name == "textbf" else (
                f"<i>{text}</i>" if name == "textit" else text)
        if name in ("mathbb", "mathcal", "mathscr", "mathfrak"):
            letters = _DOUBLE if name == "mathbb" else _SCRIPT
            return escapeHtml("".join(letters.get(c, c) for c in self.raw_argument()))
        if name in styled:
            return styled[name](self.argument(depth))
        if name in ACCENTS:
            inner = self.argument(depth)
            return f"{inner}{ACCENTS[name]}"
        if name in ("frac", "dfrac", "tfrac", "cfrac"):
            top, bottom = self.argument(depth), self.argument(depth)
            return f"<sup>{top}</sup>\u2044<sub>{bottom}</sub>"
        if name == "binom":
            top, bottom = self.argument(depth), self.argument(depth)
            return f"(<sup>{top}</sup><sub>{bottom}</sub>)"
        if name == "sqrt":
            self.skip_space()
            index = ""
            if self.peek() == "[":
                self.pos += 1
                index = f"<sup>{self.sequence(depth + 1, ']')}</sup>"
            return f"{index}√{_overline(self.argument(depth))}"
        if name == "begin":
            return self._environment(self.raw_argument(), depth)
        if name == "end":
            self.raw_argument()
            return ""
        raise Unshown  # unknown (\def, \input…): the formula is shown as written, inert

    def _environment(self, env: str, depth: int) -> str:
        if env == "array":
            self.raw_argument()  # its column layout
        body = self.sequence(depth + 1, "\\end")
        if self.peek() == "\\end":
            self.pos += 1
            self.raw_argument()
        opening, closing = FENCES.get(env.rstrip("*"), ("", ""))
        return f"{opening}{body}{closing}"


def _upright(html: str) -> str:
    return re.sub(r"</?i>", "", html)


def _overline(html: str) -> str:
    return f'<span style="text-decoration:overline">{html}</span>'


def math_html(source: str, display: bool = False) -> str:
    """The formula as rich text: a span inline, a centred paragraph for display math. What
    cannot be shown (too long, too deep) is its source in code style."""
    source = source.strip()
    try:
        if len(source) > MAX_CHARS:
            raise Unshown
        body = _Parser(source).sequence(0).replace("</i><i>", "")
    except Unshown:
        code = escapeHtml(source)
        return f'<p><code>{code}</code></p>\n' if display else f"<code>{code}</code>"
    if display:
        return f'<p align="center">{body}</p>\n'
    return f"<span>{body}</span>"
