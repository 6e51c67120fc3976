"""Screenshots of the web pages for the README, made from the bundled fixtures.

    python scripts/screenshots.py [--out docs/screenshots]

Ingests ``fixtures/source`` into a temporary store, serves the pages with
uvicorn on a loopback port and photographs the search page and a document
page with Debian's headless chromium (``/usr/bin/chromium``) through
Playwright: ``search.png`` and ``document.png``.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

from researchstore import Store
from researchstore.web import web_app

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        # Copied, so that the store records a neutral root rather than this checkout's path.
        source = folder / "fixtures"
        shutil.copytree(ROOT / "fixtures" / "source", source)
        with Store(folder / "research.db", progress=False) as store:
            store.ingest(source, name="fixtures")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sock.listen(16)
            address = f"http://127.0.0.1:{sock.getsockname()[1]}"
            server = uvicorn.Server(uvicorn.Config(web_app(store), log_level="warning"))
            thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
            thread.start()
            while not server.started:
                time.sleep(0.05)
            try:
                photograph(address, args.out, folder / "profile")
            finally:
                server.should_exit = True
                thread.join(30)
    print(f"wrote {args.out / 'search.png'} and {args.out / 'document.png'}")


def photograph(address: str, out: Path, profile: Path) -> None:
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1100, "height": 900},
        )
        page = context.new_page()
        page.goto(f"{address}/search?q=varroa+mites&tag.audience=students")
        page.screenshot(path=str(out / "search.png"))
        # The hit in the document's second chunk: opened there, shown from the page's top.
        page.locator("li.hit a.title").nth(1).click()
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(out / "document.png"))
        context.close()


if __name__ == "__main__":
    main()
