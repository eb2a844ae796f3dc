"""Discover when the Hub cannot be reached (no DNS, connection refused): the page says so in
plain words, keeps the curated catalog, and Retry works once the network is back. Online mode
throughout (HF_HUB_OFFLINE unset): this is a network that fails, not offline mode."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook.models import hub
from inglenook.models.catalog import load_catalog
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.dialog import ModelsDialog
from inglenook.ui.models.discover import EMBEDDING_HEADING, SPEECH_HEADING, DiscoverPage
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub

fake_hub = fakehub.fake_hub  # the fixture, under its own name

WAIT_MS = 20_000
_real_getaddrinfo = socket.getaddrinfo


@pytest.fixture
def discover(qtbot: QtBot, fake_hub: FakeHub) -> Iterator[DiscoverPage]:
    """The Discover page, online, its Hub (the fake one) reachable until a test cuts it off."""
    bridge = DownloadBridge()
    dialog = ModelsDialog(bridge)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.show_page("discover")
    yield dialog.discover
    bridge.close()


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The Hub at its real address, with name resolution failing the way it does offline
    (nothing reaches the network: the lookup itself fails). Returns the names looked up."""
    looked_up: list[str] = []

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        if host in ("127.0.0.1", "localhost", "::1"):
            return _real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]
        looked_up.append(str(host))
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setenv("HF_ENDPOINT", "https://huggingface.co")
    return looked_up


def refused_endpoint() -> str:
    """A loopback port nobody listens on: connections are refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def assert_plain_offline_notice(page: DiscoverPage, host: str) -> None:
    text = page.notice.text()
    assert page.notice.isVisible() and page.notice.property("kind") == "info"
    assert text.startswith(f"Can't reach {host}") and "offline" in text
    for raw in ("Errno", "errno", "[", "gaierror", "Connect", "name resolution", "refused"):
        assert raw not in text, text
    assert page.retry_button.isVisible()


def search(qtbot: QtBot, page: DiscoverPage, text: str) -> None:
    page.query.setText(text)
    qtbot.mouseClick(page.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not page.busy, timeout=WAIT_MS)


def test_a_search_without_a_network_says_so_keeps_the_catalog_and_retries(
        qtbot: QtBot, discover: DiscoverPage, fake_hub: FakeHub, no_dns: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = [e.repo for e in load_catalog()]
    assert not discover.retry_button.isVisible()
    search(qtbot, discover, "qwen")
    assert set(no_dns) == {"huggingface.co"}  # it did try, and the lookup failed
    tries = len(no_dns)
    assert_plain_offline_notice(discover, "huggingface.co")
    assert discover.result_ids() == catalog  # the curated list is back, not an empty one
    assert discover.results.item(0).text() == "Curated catalog"

    # Still offline: Retry tries again and says the same.
    discover.retry_button.click()  # just shown: not laid out yet for a mouse click
    qtbot.waitUntil(lambda: not discover.busy, timeout=WAIT_MS)
    assert len(no_dns) > tries
    assert_plain_offline_notice(discover, "huggingface.co")

    # Back online: Retry searches again and the notice goes.
    fake_hub.add_repo("a/Qwen-Tiny-GGUF", downloads=5)
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    discover.retry_button.click()
    qtbot.waitUntil(lambda: not discover.busy, timeout=WAIT_MS)
    assert discover.result_ids() == ["a/Qwen-Tiny-GGUF"]
    assert not discover.notice.isVisible() and not discover.retry_button.isVisible()


def test_a_catalog_model_opened_without_a_network_shows_its_recommended_files(
        qtbot: QtBot, discover: DiscoverPage, fake_hub: FakeHub,
        monkeypatch: pytest.MonkeyPatch) -> None:
    entry = load_catalog()[0]
    endpoint = refused_endpoint()
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    discover.results.setCurrentRow(1)  # 0 is the heading
    qtbot.waitUntil(lambda: discover.notice.isVisible(), timeout=WAIT_MS)
    assert_plain_offline_notice(discover, endpoint.split("//")[1])
    assert discover.repo_panel.repo_title.text() == entry.name
    assert [name for _q, name, _s, _f in discover.repo_panel.file_rows()] == list(entry.recommended)
    assert discover.result_ids() == [e.repo for e in load_catalog()]
    assert fake_hub.requests == []

    fake_hub.add_repo(entry.repo, [FakeFile(name, 4096) for name in entry.recommended])
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    discover.retry_button.click()
    qtbot.waitUntil(lambda: discover.repo_panel.listing is not None, timeout=WAIT_MS)
    assert sorted(m.name for m in discover.repo_panel.listing.models) == sorted(entry.recommended)
    assert not discover.notice.isVisible() and not discover.retry_button.isVisible()
    # The fit planner reads a header (these files have none): let it finish before closing.
    panel = discover.repo_panel
    qtbot.waitUntil(lambda: bool(panel.report or panel.fit_error), timeout=WAIT_MS)


def test_offline_mode_is_not_offered_a_retry(qtbot: QtBot, discover: DiscoverPage,
                                             fake_hub: FakeHub,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """HF_HUB_OFFLINE=1 is the user's choice: nothing is sent and Retry would change nothing."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    search(qtbot, discover, "qwen")
    assert discover.notice.isVisible() and "offline" in discover.notice.text()
    assert not discover.retry_button.isVisible()
    assert discover.result_ids() == [e.repo for e in load_catalog()]
    assert fake_hub.requests == []


def test_bringing_the_catalog_back_opens_nothing_on_the_hub(qtbot: QtBot,
                                                            discover: DiscoverPage,
                                                            fake_hub: FakeHub) -> None:
    """Focus lands on the list when a search disables its button, and a list that gets focus
    makes its first row current: that must not open the model on the Hub unasked."""
    discover.results.setFocus()
    assert discover.results.hasFocus()
    discover.query.setText("qwen")
    discover.query.clear()  # an emptied search box brings the catalog back
    assert discover.result_ids() == [e.repo for e in load_catalog()]
    assert discover.results.currentRow() == -1
    assert not discover.working and not discover.repo_panel.working
    assert not discover.repo_panel.repo_title.isVisible()
    assert fake_hub.requests == []


def test_embedding_models_are_listed_apart_under_their_own_heading(
        discover: DiscoverPage) -> None:
    texts = [discover.results.item(i).text() for i in range(discover.results.count())]
    heading = texts.index(EMBEDDING_HEADING)
    ids = discover.result_ids()
    embedding = [e.repo for e in load_catalog() if e.is_embedding]
    assert {"nomic-ai/nomic-embed-text-v1.5-GGUF", "CompendiumLabs/bge-small-en-v1.5-gguf"} \
        <= set(embedding)
    assert ids[-len(embedding):] == embedding  # after the heading, chat models before it
    speech = texts.index(SPEECH_HEADING)  # the speech models come last, under their own
    assert heading == speech - len(embedding) - 1
    assert not any(e.is_embedding for e in load_catalog() if e.repo in ids[:-len(embedding)])


def test_a_hub_that_trickles_its_answer_ends_the_search_with_its_own_notice(
        qtbot: QtBot, discover: DiscoverPage, fake_hub: FakeHub,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A header line every 0.1 s, each read within its timeout: the search's deadline ends
    it (one every 2 s held Discover for good), and the page says so, not that it is offline."""
    fake_hub.add_repo("a/Qwen-Tiny-GGUF", downloads=5)
    fake_hub.trickle_headers = {"hub"}
    monkeypatch.setattr(hub, "MAX_JSON_SECONDS", 1.0)
    search(qtbot, discover, "qwen")
    host = fake_hub.url.split("//")[1]
    assert discover.notice.text() == (f"Search failed. {host} did not finish answering within "
                                      "1 s; try again later.")
    assert discover.retry_button.isVisible()
    fake_hub.trickle_headers = set()
    discover.retry_button.click()
    qtbot.waitUntil(lambda: not discover.busy, timeout=WAIT_MS)
    assert discover.result_ids() == ["a/Qwen-Tiny-GGUF"]
