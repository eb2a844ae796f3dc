"""The branch of a conversation on screen, read from SQLite page by page.

A 10,000-message chat must open at once, so the active path is first read as an outline: one
row of a few numbers per message (`Outline`; ~50 ms for 10,000 messages, in SQLite's C code), and
the messages themselves are read in pages of PAGE when something asks for them — the transcript
for the rows in view, the session for what it sends. At most KEEP_PAGES pages are kept, the most
recently used, so memory does not grow with the length of the chat. Reading every message in
order (`iter`) does not disturb the pages kept.

A write changes the path only from some message on (a new reply, an edit, another version): the
session calls `refresh_from(index)`, which reads the outline below that point again and forgets
the messages from there (the page holding that point keeps those above it), so keeping the path
current costs what changed, not the whole chat: a question sent below 20 photos does not read
their bytes from SQLite again.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from inglenook.store.errors import StoreError
from inglenook.store.records import StoredMessage

if TYPE_CHECKING:
    from inglenook.store.store import Store

PAGE = 64
KEEP_PAGES = 8


@dataclass(frozen=True, slots=True)
class MessageOutline:
    """What is known of a message without reading it: enough to estimate its height and its
    tokens, and to count the turns a reply was sent."""

    id: int
    role: str
    chars: int  # of its answer
    reasoning: int  # characters of its reasoning
    newlines: int  # in its answer
    calls_tools: bool
    attachments: int  # a user's files, or the sources a reply was given: its row of chips
    attached: int  # characters of its attachments (names and text; an image as its tokens)
    images: int = 0  # of its attachments, how many are images (shown as thumbnails)


_ROLES = {role: role for role in ("user", "assistant", "system", "tool")}


class Outline(Sequence[MessageOutline]):
    """The outline of a branch as columns: a 10,000-message chat is a few arrays of numbers,
    not 10,000 objects for the garbage collector to walk at every full collection (which
    stalled the GUI thread). Items are made when asked for."""

    def __init__(self) -> None:
        self.ids = array("q")
        self.roles: list[str] = []
        self.chars = array("q")
        self.reasoning = array("q")
        self.newlines = array("q")
        self.calls_tools = bytearray()
        self.attachments = array("q")
        self.attached = array("q")
        self.images = array("q")

    def _columns(self) -> tuple[Any, ...]:
        return (self.ids, self.roles, self.chars, self.reasoning, self.newlines,
                self.calls_tools, self.attachments, self.attached, self.images)

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> MessageOutline: ...

    @overload
    def __getitem__(self, index: slice) -> list[MessageOutline]: ...

    def __getitem__(self, index: int | slice) -> MessageOutline | list[MessageOutline]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return MessageOutline(self.ids[index], self.roles[index], self.chars[index],
                              self.reasoning[index], self.newlines[index],
                              bool(self.calls_tools[index]), self.attachments[index],
                              self.attached[index], self.images[index])

    def append(self, row: Sequence[Any]) -> None:
        """One message: (id, role, chars, reasoning, newlines, calls tools, attachments,
        attached, images), as store.outline reads them."""
        id_, role, chars, reasoning, newlines, calls, attachments, attached, images = row
        self.ids.append(int(id_))
        self.roles.append(_ROLES.get(role, str(role)))
        self.chars.append(int(chars or 0))
        self.reasoning.append(int(reasoning or 0))
        self.newlines.append(int(newlines or 0))
        self.calls_tools.append(1 if calls else 0)
        self.attachments.append(int(attachments or 0))
        self.attached.append(int(attached or 0))
        self.images.append(int(images or 0))

    def extend(self, rows: Sequence[Sequence[Any]]) -> None:
        """Many messages at once, column by column (store.outline's rows)."""
        if not rows:
            return
        ids, roles, chars, reasoning, newlines, calls, attachments, attached, images = zip(
            *rows, strict=True)
        self.ids.extend(ids)  # integers, never NULL (store/messages.py _OUTLINE)
        self.roles.extend([_ROLES.get(role, str(role)) for role in roles])
        self.chars.extend(chars)
        self.reasoning.extend(reasoning)
        self.newlines.extend(newlines)
        self.calls_tools.extend(calls)
        self.attachments.extend(attachments)
        self.attached.extend(attached)
        self.images.extend(images)

    def truncate(self, count: int) -> None:
        for column in self._columns():
            del column[count:]

    def set(self, index: int, row: MessageOutline) -> None:
        self.ids[index], self.roles[index] = row.id, row.role
        self.chars[index], self.reasoning[index] = row.chars, row.reasoning
        self.newlines[index], self.calls_tools[index] = row.newlines, int(row.calls_tools)
        self.attachments[index], self.attached[index] = row.attachments, row.attached
        self.images[index] = row.images

    def copy(self) -> Outline:
        other = Outline()
        for mine, theirs in zip(self._columns(), other._columns(), strict=True):
            theirs.extend(mine)
        return other


class Branch(Sequence[StoredMessage]):
    """The active path of conversation `conv_id` (empty for a chat not saved yet)."""

    def __init__(self, store: Store | None = None, conv_id: int | None = None) -> None:
        self._store, self.conv_id = store, conv_id
        self.outline = Outline()
        self._index: dict[int, int] | None = None  # message id -> position, made when needed
        self._pages: OrderedDict[int, list[StoredMessage]] = OrderedDict()
        if store is not None and conv_id is not None:
            self.refresh_from(0)

    def __len__(self) -> int:
        return len(self.outline)

    @overload
    def __getitem__(self, index: int) -> StoredMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[StoredMessage]: ...

    def __getitem__(self, index: int | slice) -> StoredMessage | list[StoredMessage]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return list(self._read(start, stop))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("branch index out of range")
        return self._page(index // PAGE)[index % PAGE]

    def __iter__(self) -> Iterator[StoredMessage]:
        return self._read(0, len(self))

    def __reversed__(self) -> Iterator[StoredMessage]:
        for index in range(len(self) - 1, -1, -1):  # from the end: mostly the last page or two
            yield self[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Branch(conversation={self.conv_id}, messages={len(self)})"

    def ids(self) -> list[int]:
        return list(self.outline.ids)

    def index_of(self, message_id: int) -> int | None:
        if self._index is None:
            self._index = {id_: n for n, id_ in enumerate(self.outline.ids)}
        return self._index.get(message_id)

    def find(self, message_id: int) -> StoredMessage | None:
        index = self.index_of(message_id)
        return None if index is None else self[index]

    # ---- keeping it current ----------------------------------------------------------------

    def refresh_from(self, index: int) -> None:
        """Read the path again from position `index` on (what is above it is unchanged)."""
        if self._store is None or self.conv_id is None:
            return
        index = max(0, min(index, len(self.outline)))
        below = self.outline.ids[index - 1] if index else None
        rows = self._store.outline(self.conv_id, below)
        self.outline.truncate(index)
        self.outline.extend(rows)
        self._index = None
        for page in [p for p in self._pages if (p + 1) * PAGE > index]:
            above = self._pages[page][:max(0, index - page * PAGE)]
            if above:  # unchanged: the rest of the page is read when it is asked for
                self._pages[page] = above
            else:
                del self._pages[page]

    def forget(self) -> None:
        """Let the messages read so far go (the chat left the screen)."""
        self._pages.clear()

    # ---- reading ---------------------------------------------------------------------------

    def _page(self, page: int) -> list[StoredMessage]:
        start, stop = page * PAGE, min(len(self), (page + 1) * PAGE)
        found = self._pages.get(page)
        if found is not None and len(found) >= stop - start:
            self._pages.move_to_end(page)
            return found
        if found is None:
            found = self._fetch(start, stop)
        else:  # kept above a write: what is below it is read
            found = found + self._fetch(start + len(found), stop)
        self._pages[page] = found
        self._pages.move_to_end(page)
        while len(self._pages) > KEEP_PAGES:
            self._pages.popitem(last=False)
        return found

    def _fetch(self, start: int, stop: int) -> list[StoredMessage]:
        assert self._store is not None
        wanted = list(self.outline.ids[start:stop])
        got = self._store.messages_by_id(wanted)
        if len(got) != len(wanted):  # deleted meanwhile, by another window or the command line
            raise StoreError("This conversation was changed elsewhere while it was open; "
                             "open it again.")
        return got

    def _read(self, start: int, stop: int) -> Iterator[StoredMessage]:
        """Messages start..stop in order: kept pages as they are, the others read in large
        chunks and not kept."""
        index = start
        while index < stop:
            page = index // PAGE
            kept = self._pages.get(page)
            if kept is not None:
                kept = self._page(page)  # a page kept in part is read to its end
                end = min(stop, (page + 1) * PAGE)
                yield from kept[index - page * PAGE:end - page * PAGE]
                index = end
                continue
            end = index
            while end < stop and (end // PAGE) not in self._pages and end - index < 8 * PAGE:
                end = min(stop, (end // PAGE + 1) * PAGE)
            yield from self._fetch(index, end)
            index = end
