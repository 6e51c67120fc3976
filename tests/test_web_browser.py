"""The pages in a real browser: Debian's headless chromium, driven by Playwright.

The pages are served by a real uvicorn server on a loopback port (in a thread
of this process), and read with JavaScript off, as they must work without
it: search the fixtures, follow a hit to its document and chunk, page
through results, open a replaced chunk id. Markup inside page text is shown
as text, and with JavaScript on no script in it runs.
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import HERON_REPORTS, HOSTILE_TEXT, HOSTILE_TITLE, Built

from researchstore import Store
from researchstore.web import web_app

CHROMIUM = Path("/usr/bin/chromium")
#: What chromium needs to run headless as root in a container, talking to no one.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def site(built: Built) -> Iterator[str]:
    """The pages of the built store under uvicorn on a free loopback port; its address."""
    import uvicorn

    with Store(built.db, progress=False) as store:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        port = sock.getsockname()[1]
        config = uvicorn.Config(web_app(store), log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(30)
            sock.close()


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    """Playwright, one for the module (its sync API allows one at a time)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as running:
        yield running


@contextmanager
def browser(playwright: Any, *, javascript: bool) -> Iterator[Any]:
    """A headless chromium context with a profile of its own."""
    with tempfile.TemporaryDirectory() as profile:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            java_script_enabled=javascript,
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="module")
def page(playwright: Any, site: str) -> Iterator[Any]:
    """A page of a browser with JavaScript off."""
    with browser(playwright, javascript=False) as context:
        opened = context.new_page()
        opened.set_default_timeout(20_000)
        yield opened


def test_search_the_fixtures_and_follow_a_hit_to_its_document_and_chunk(
    page: Any, site: str
) -> None:
    page.goto(f"{site}/search")
    page.fill("form.search input[name=q]", "varroa mites")
    page.select_option("select[name=source]", "fixtures")
    page.click("form.search button[type=submit]")
    assert "/search?" in page.url and "q=varroa+mites" in page.url
    hits = page.locator("li.hit")
    assert hits.count() >= 2
    first = hits.nth(0)
    assert first.locator("mark").count() >= 1
    assert "varroa" in first.locator("mark").first.inner_text().lower()
    title = first.locator("a.title").inner_text()
    href = first.locator("a.title").get_attribute("href")
    chunk_id = href.rsplit("/", 1)[1]

    first.locator("a.title").click()
    # /chunk/ID opens the document at that chunk: its anchor in the address.
    assert page.url.endswith(f"#chunk-{chunk_id}")
    assert "/document/" in page.url
    chunk = page.locator(f"#chunk-{chunk_id}")
    assert chunk.is_visible()
    assert "varroa" in chunk.locator(".text").inner_text().lower()
    assert page.locator("li.chunk").count() > 1
    assert title in page.locator("nav.crumbs").inner_text()

    # The permalink of another chunk leads to that chunk of the same document.
    other = page.locator("li.chunk").nth(0)
    other_id = other.get_attribute("id").removeprefix("chunk-")
    other.locator("a.position").click()
    assert page.url.endswith(f"#chunk-{other_id}")

    # Up the breadcrumbs to the report, then its folder listing.
    page.locator("nav.crumbs a").last.click()
    assert "/report/" in page.url
    assert page.locator("h1").inner_text() == title
    page.locator("nav.crumbs a").last.click()
    assert "/reports?source=fixtures&folder=" in page.url
    assert page.locator("table").count() == 1


def test_page_through_results(page: Any, site: str) -> None:
    page.goto(f"{site}/search?q=heron&source=notes")
    seen: list[str] = []
    numbers = []
    while True:
        links = page.locator("li.hit a.title")
        seen += [links.nth(i).get_attribute("href") for i in range(links.count())]
        numbers.append(page.locator("nav.pager span").inner_text())
        following = page.locator("nav.pager a[rel=next]")
        if following.count() == 0:
            break
        following.click()
    assert numbers == ["Page 1", "Page 2", "Page 3"]
    assert len(seen) == len(set(seen)) == HERON_REPORTS
    page.locator("nav.pager a[rel=prev]").click()
    assert page.locator("nav.pager span").inner_text() == "Page 2"
    assert page.locator("ol.hits").get_attribute("start") == "11"


def test_open_a_replaced_chunk_id(page: Any, site: str, built: Built) -> None:
    old = built.old_ledger[-1]["chunk_id"]
    page.goto(f"{site}/chunk/{old}")
    note = page.locator("p.note").inner_text()
    assert "replaced" in note and built.summary.version_id in note
    current = page.locator("ol.chunks a.position").first
    new_id = current.get_attribute("href").rsplit("/", 1)[1]
    assert new_id in {chunk["chunk_id"] for chunk in built.new_ledger}
    current.click()
    assert page.url.endswith(f"#chunk-{new_id}")
    assert page.locator(f"#chunk-{new_id}").is_visible()


def test_markup_in_page_text_is_shown_as_text(page: Any, site: str) -> None:
    page.goto(f"{site}/search?q=zebrafinch")
    hit = page.locator("li.hit").first
    assert hit.locator("a.title").inner_text() == HOSTILE_TITLE
    assert hit.locator(".tag").inner_text() == "audience: <i>staff</i>"
    hit.locator("a.title").click()
    text = page.locator("li.chunk .text").first.inner_text()
    assert text.endswith(HOSTILE_TEXT)
    assert page.locator("h1").inner_text() in {HOSTILE_TITLE, "notes.txt"}
    main = page.locator("main")
    assert main.locator("script").count() == 0
    assert main.locator("img").count() == 0
    assert main.locator("b").count() == 0


def test_no_script_in_page_text_runs(playwright: Any, site: str) -> None:
    with browser(playwright, javascript=True) as context:
        opened = context.new_page()
        dialogs: list[str] = []
        opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        opened.goto(f"{site}/search?q=zebrafinch")
        opened.locator("li.hit a.title").first.click()
        assert opened.evaluate("typeof window.pwned") == "undefined"
        assert opened.evaluate("document.scripts.length") == 0
        assert dialogs == []
