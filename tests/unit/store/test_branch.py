"""The branch on screen, read page by page: an outline of numbers for every message, messages
read when asked for, at most KEEP_PAGES pages kept, and refreshed only from where it changed."""

from __future__ import annotations

import pytest

from inglenook.store import Store
from inglenook.store.branch import KEEP_PAGES, PAGE, Branch
from tests.helpers.long_chat import add_long_chat, text_of


@pytest.fixture
def store() -> Store:
    return Store()


def test_the_outline_knows_every_message_without_reading_it(store: Store) -> None:
    conv = add_long_chat(store, 1_000)
    branch = Branch(store, conv)
    assert len(branch) == 1_000 and branch._pages == {}
    outline = branch.outline
    assert outline.roles[:2] == ["user", "assistant"]
    assert outline.chars[3] == len(text_of(3)) and outline.newlines[3] == text_of(3).count("\n")
    assert branch.ids() == [m.id for m in store.active_path(conv)]


def test_messages_are_read_a_page_at_a_time_and_few_pages_are_kept(store: Store) -> None:
    conv = add_long_chat(store, 1_000)
    branch = Branch(store, conv)
    assert branch[-1].content == text_of(999)
    assert list(branch._pages) == [999 // PAGE]
    for index in range(0, 1_000, 50):
        assert branch[index].content == text_of(index)
        assert len(branch._pages) <= KEEP_PAGES
    assert [m.content for m in branch[10:13]] == [text_of(n) for n in (10, 11, 12)]


def test_reading_it_all_leaves_the_kept_pages_alone(store: Store) -> None:
    conv = add_long_chat(store, 700)
    branch = Branch(store, conv)
    last = branch[-1]
    kept = dict(branch._pages)
    assert [m.content for m in branch] == [text_of(n) for n in range(700)]
    assert branch._pages == kept and branch[-1] is last
    assert branch == store.active_path(conv)
    assert [m.content for m in reversed(branch)][:2] == [text_of(699), text_of(698)]


def test_a_refresh_reads_again_only_from_where_the_branch_changed(store: Store) -> None:
    conv = add_long_chat(store, 300)
    branch = Branch(store, conv)
    early, late = branch[5], branch[299]
    reply = store.add_message(conv, "assistant", "A second version.", branch[298].id)
    branch.refresh_from(299)
    assert branch[5] is early  # its page was kept
    assert branch[299] is not late and branch[299].content == "A second version."
    assert branch[299].sibling_count == 2 and branch.index_of(reply) == 299
    store.show(late.id)
    branch.refresh_from(299)
    assert branch[299].content == text_of(299)
    store.delete_from(branch[200].id)
    branch.refresh_from(200)
    assert len(branch) == 200 and branch.index_of(late.id) is None
    assert branch == store.active_path(conv)


def test_a_write_keeps_the_messages_above_it_in_its_page(store: Store) -> None:
    """A question sent below photos must not read them (megabytes each) from SQLite again."""
    conv = add_long_chat(store, 100)  # the second page holds messages 64-99
    branch = Branch(store, conv)
    above, last = branch[70], branch[99]
    store.add_message(conv, "user", "One more.", last.id)
    branch.refresh_from(100)
    assert branch[70] is above and branch[99] is last  # kept, not read again
    assert branch[100].content == "One more." and len(branch._pages[1]) == 37
    store.delete_from(branch[80].id)
    branch.refresh_from(80)
    assert len(branch._pages[1]) == 16 and branch[70] is above
    assert [m.content for m in branch[60:80]] == [text_of(n) for n in range(60, 80)]
    assert branch == store.active_path(conv)


def test_a_conversation_changed_elsewhere_says_so(store: Store) -> None:
    from inglenook.store import StoreError

    conv = add_long_chat(store, 100)
    branch = Branch(store, conv)
    store.delete(conv)
    store.purge_deleted()
    with pytest.raises(StoreError, match="changed elsewhere"):
        branch[50]


def test_find_in_a_conversation_matches_words_and_prefixes(store: Store) -> None:
    conv = add_long_chat(store, 40)
    other = add_long_chat(store, 40, title="Another")
    found = store.find_in(conv, "TELL item 2")  # item 2, 20, 22…: the last word is a prefix
    branch = Branch(store, conv)
    assert sorted(branch.index_of(i) for i in found) == [2, 20, 22, 24, 26, 28]
    assert store.find_in(other, "zeppelin") == []
    assert store.find_in(conv, "   ") == []
