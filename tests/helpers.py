"""What the test modules share: paths, sources on disk, child programs, contracts, a site,
the MCP server over HTTP.

``conftest.py`` holds the fixtures and builds them from what is here; test
modules import from this module, never from ``conftest`` or from each other.

The site is a real HTTPS server on loopback (``HttpsServer``): a threaded
``http.server`` wrapped in TLS with a certificate ``trustme`` makes here.
Its policy lets ``127.0.0.1/32`` through explicitly and resolves the test
names (``evidence.test``...) to it with a static resolver, so the fetcher's
name-based checks, SNI and ``Host`` are real.
"""

from __future__ import annotations

import datetime
import gzip
import ipaddress
import json
import os
import re
import shutil
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, closing, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import trustme
from programs.hashing import HashingEmbedder as HashingEmbedder  # for test modules

from researchstore.fetch import FetchPolicy, static_resolver
from researchstore.library import Library

if TYPE_CHECKING:
    from mcp import ClientSession
# -- paths ---------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURE_SOURCE = ROOT / "fixtures" / "source"
#: The child programs that tests run in their own processes.
PROGRAMS = TESTS / "programs"
#: The seeds' JSON Schemas, copied from the workspace's ``shared/schemas``.
SCHEMAS = TESTS / "schemas"

# -- sources on disk -----------------------------------------------------------

PARAGRAPHS = [
    "Foragers returned to the hive at dusk carrying pollen from the lime trees.",
    "Varroa mite counts rose sharply after the second brood cycle in June.",
    "The colony was treated with oxalic acid once the brood had capped.",
    "Students logged hive weight every morning on a shared spreadsheet.",
    "Dissolved oxygen in the river fell below five milligrams per litre in August.",
    "Nitrate runoff from the fields peaked after the first autumn storm.",
]


def write_report(
    root: Path,
    key: str,
    *,
    title: str,
    date: str,
    tags: dict[str, str],
    files: dict[str, str],
) -> Path:
    """A report directory with report.json and the given document files."""
    folder = root / key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps({"title": title, "date": date, "tags": tags}))
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def text_report(root: Path, key: str, language: str, title: str, text: str) -> None:
    """A one-document report whose text declares its language (front matter)."""
    write_report(
        root,
        key,
        title=title,
        date="2026-05-01",
        tags={},
        files={"notes.txt": f"---\nlang: {language}\ntitle: {title}\n---\n{text}\n"},
    )


def norwegian_source(root: Path) -> Path:
    """Three reports in Norwegian, one in English."""
    text_report(
        root,
        "bier",
        "nb",
        "Bikuber om vinteren",
        "Bikubene med mye varroamidd døde i løpet av vinteren.",
    )
    text_report(
        root, "elv", "nb", "Elva etter regnet", "Etter regnet førte elva mye sediment og slam."
    )
    text_report(
        root, "lav", "nb-NO", "Lav på bjørk", "Lavene på bjørkene forsvant nær den travle veien."
    )
    text_report(
        root, "soil", "en", "Living soils", "Earthworms pull fallen leaves into their burrows."
    )
    return root


def rewrite(path: Path, data: bytes) -> None:
    """Give ``path`` new contents as a new file, never truncating the one a process may map.

    An index file may still be mapped by a store this process closed but the
    garbage collector has not freed yet; a file truncated under a mapping
    raises SIGBUS wherever the mapping is read past its new end.
    """
    temporary = path.with_name(path.name + ".new")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def wait_for(done: Callable[[], object], what: str, *, seconds: float = 60) -> None:
    """Poll ``done()`` until it is true; fail, naming ``what``, after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.02)


def long_text(paragraphs: int, *, seed: int = 0) -> str:
    """Paragraphs of distinct sentences, enough for several chunks."""
    out = []
    for number in range(paragraphs):
        sentences = [
            f"{PARAGRAPHS[(number + seed + k) % len(PARAGRAPHS)]} Note {number}.{k}."
            for k in range(6)
        ]
        out.append(" ".join(sentences))
    return "\n\n".join(out)


# -- tool envelopes --------------------------------------------------------------

WORKSPACE = "11111111-1111-4111-8111-111111111111"
OTHER_WORKSPACE = "22222222-2222-4222-8222-222222222222"


def ok(envelope: dict[str, Any]) -> Any:
    """The result of an envelope that must be a success."""
    assert set(envelope) == {"result"}, envelope
    return envelope["result"]


# -- child programs ------------------------------------------------------------


def program(name: str) -> list[str]:
    """The command line that runs ``tests/programs/<name>.py`` with this interpreter."""
    path = PROGRAMS / f"{name}.py"
    assert path.is_file(), path
    return [sys.executable, str(path)]


#: ``researchstore`` as a fresh clone can start it: no console script needed.
CLI = program("cli")


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``researchstore ARGS...`` in a child process, its output captured."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


# -- contracts -----------------------------------------------------------------

FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER
#: Formats as seed 000 is read: its chunk ``date`` is a required string, and
#: a report without a date answers "" there (the one string that cannot be
#: taken for a day; JSON Schema's ``format`` is an annotation unless a
#: validator asserts it). Every other date must be a calendar date.
SEED_FORMATS = jsonschema.FormatChecker()


@SEED_FORMATS.checks("date", raises=ValueError)
def _seed_date(instance: object) -> bool:
    if isinstance(instance, str) and instance:
        datetime.date.fromisoformat(instance)
        return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", instance))
    return True


def load_schema(name: str) -> dict[str, Any]:
    """A seed's JSON Schema from ``tests/schemas`` (``get_chunk.output.json``...)."""
    schema: dict[str, Any] = json.loads((SCHEMAS / name).read_text())
    return schema


def validator(schema: dict[str, Any], *, formats: Any = None) -> Any:
    """A validator for the schema's own draft (2020-12 if it names none), formats checked."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=formats or cls.FORMAT_CHECKER)


# -- an HTTPS site on loopback ---------------------------------------------------

NAMES = ("evidence.test", "other.test", "www.youtube.com", "127.0.0.1")
LOOPBACK = (ipaddress.ip_network("127.0.0.1/32"),)

Route = Callable[["Handler"], None]


def page(title: str, body: str, *, lang: str = "en", head: str = "") -> bytes:
    return (
        f'<!doctype html><html lang="{lang}"><head><title>{title}</title>'
        f'<meta name="description" content="About {title.lower()}.">{head}</head>'
        f"<body><nav><a href='/'>Home</a></nav><main>{body}</main>"
        "<footer>Footer links</footer></body></html>"
    ).encode()


ARTICLE = page(
    "Hive survey",
    "<h1>Hive survey</h1><p>Varroa mite counts rose sharply after the second brood cycle.</p>"
    "<p>The colony was treated with oxalic acid once the brood had capped.</p>",
)


class Handler(BaseHTTPRequestHandler):
    server: HttpsServer
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.server.requests.append((self.headers.get("Host", ""), path))
        route = self.server.routes.get(path)
        if route is None:
            self.send_bytes(b"<p>nothing here</p>", status=404)
            return
        try:
            route(self)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client gave up (deadline, cancel, limit): expected

    def send_bytes(
        self,
        body: bytes,
        *,
        status: int = 200,
        content_type: str = "text/html; charset=utf-8",
        headers: dict[str, str] | None = None,
        length: int | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class HttpsServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.context = context
        self.routes: dict[str, Route] = {}
        self.requests: list[tuple[str, str]] = []
        self.server_names: list[str | None] = []
        context.sni_callback = self._sni

    def _sni(self, sock: ssl.SSLSocket, name: str | None, context: ssl.SSLContext) -> None:
        self.server_names.append(name)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        sock.settimeout(10)
        # The handshake runs in the handler's thread, not in the accept loop.
        return self.context.wrap_socket(
            sock, server_side=True, do_handshake_on_connect=False
        ), address

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError):
            return
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-response is part of these tests

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, path: str, host: str = "evidence.test") -> str:
        return f"https://{host}:{self.port}{path}"


@dataclass
class Site:
    """A running server, the CA that signed it and a policy that may reach it."""

    server: HttpsServer
    ca: trustme.CA
    client_context: ssl.SSLContext
    policy: FetchPolicy
    ca_file: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def url(self, path: str, host: str = "evidence.test") -> str:
        return self.server.url(path, host)

    def route(self, path: str) -> Callable[[Route], Route]:
        def add(function: Route) -> Route:
            self.server.routes[path] = function
            return function

        return add

    def requests_for(self, path: str) -> int:
        return sum(1 for _, seen in self.server.requests if seen == path)


def static(body: bytes, **options: Any) -> Route:
    return lambda handler: handler.send_bytes(body, **options)


def redirect(location: str | Callable[[], str], status: int = 302) -> Route:
    def send(handler: Handler) -> None:
        target = location() if callable(location) else location
        handler.send_bytes(b"", status=status, headers={"Location": target})

    return send


def drip(handler: Handler) -> None:
    """Headers at once, then one byte every 50 ms for up to 10 s."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html")
    handler.end_headers()
    handler.wfile.flush()
    for _ in range(200):
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(0.05)


class Drip:
    """A route like ``drip`` that records how it ended.

    Headers at once, then one byte at a time, ``pause`` seconds apart, until
    the client goes away or ``limit`` bytes are out. ``on_byte(sent)`` runs
    after each byte: a test moves a clock or sets a cancel event there.
    """

    def __init__(
        self,
        *,
        limit: int = 200,
        pause: float = 0.05,
        on_byte: Callable[[int], object] | None = None,
    ) -> None:
        self.limit = limit
        self.pause = pause
        self.on_byte = on_byte
        self.sent = 0
        self.client_left = False
        #: Set once the response has ended, either way.
        self.done = threading.Event()

    def __call__(self, handler: Handler) -> None:
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "text/html")
            handler.end_headers()
            handler.wfile.flush()
            while self.sent < self.limit:
                handler.wfile.write(b" ")
                handler.wfile.flush()
                self.sent += 1
                if self.on_byte is not None:
                    self.on_byte(self.sent)
                time.sleep(self.pause)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.client_left = True
        finally:
            self.done.set()


def endless(handler: Handler) -> None:
    """A body without a length that never stops on its own (8 MiB at most)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html")
    handler.end_headers()
    block = b"<p>" + b"x" * 65_000 + b"</p>"
    for _ in range(128):
        handler.wfile.write(block)


def truncated(handler: Handler) -> None:
    """Declares 100,000 bytes, sends a page's worth and closes."""
    body = page("Cut short", "<p>" + "The first half arrived intact. " * 60 + "</p>")
    handler.send_bytes(body, length=100_000)


BOMB = gzip.compress(b" " * (40 * 1024 * 1024), compresslevel=9)


def install_routes(site: Site) -> None:
    routes = site.server.routes
    routes.update(
        {
            "/page.html": static(ARTICLE),
            "/gzip.html": static(gzip.compress(ARTICLE), headers={"Content-Encoding": "gzip"}),
            "/deflate.html": static(
                zlib.compress(ARTICLE)[2:-4], headers={"Content-Encoding": "deflate"}
            ),
            "/brotli.html": static(b"\x0b\x02\x80hello\x03", headers={"Content-Encoding": "br"}),
            "/bomb.html": static(BOMB, headers={"Content-Encoding": "gzip"}),
            "/declared-huge.html": static(b"", length=1_000_000_000),
            "/endless.html": endless,
            "/slow.html": drip,
            "/truncated.html": truncated,
            "/401": static(b"no", status=401, headers={"WWW-Authenticate": "Basic"}),
            "/403": static(b"no", status=403),
            "/404": static(b"no", status=404),
            "/410": static(b"gone", status=410),
            "/429": static(b"slow down", status=429, headers={"Retry-After": "120"}),
            "/429-date": static(
                b"slow down", status=429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
            ),
            "/500": static(b"oops", status=500),
            "/503": static(b"later", status=503, headers={"Retry-After": "30"}),
            "/to-page": redirect("/page.html"),
            "/hop-1": redirect("/hop-2", 301),
            "/hop-2": redirect("/hop-3", 307),
            "/hop-3": redirect("/page.html", 308),
            "/loop": redirect("/loop"),
            "/to-http": redirect(lambda: f"http://evidence.test:{site.server.port}/page.html"),
            "/to-localhost": redirect(lambda: f"https://localhost:{site.server.port}/page.html"),
            "/to-private": redirect(lambda: f"https://private.test:{site.server.port}/page.html"),
            "/to-other": redirect(lambda: f"https://other.test:{site.server.port}/page.html"),
        }
    )


@contextmanager
def serve_site() -> Iterator[Site]:
    """The HTTPS server on a free loopback port, with every route above installed."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*NAMES).configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    server = HttpsServer(server_context)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    resolver = static_resolver(
        {
            "evidence.test": ["127.0.0.1"],
            "other.test": ["127.0.0.1"],
            "www.youtube.com": ["127.0.0.1"],
            "nocert.test": ["127.0.0.1"],
            "private.test": ["10.0.0.7"],
        },
        None,
    )
    policy = FetchPolicy(
        allowed_networks=LOOPBACK,
        resolver=resolver,
        ssl_context=client_context,
        timeout_s=5,
        max_bytes=1_000_000,
    )
    with ca.cert_pem.tempfile() as ca_file:
        site = Site(server, ca, client_context, policy, ca_file=ca_file)
        install_routes(site)
        try:
            yield site
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)


# -- run logs ------------------------------------------------------------------


def run_events(stdout: str) -> list[dict[str, Any]]:
    """What ``ingest --json`` / ``reingest --json`` printed: one JSON object a line."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def run_summaries(stdout: str) -> list[dict[str, Any]]:
    """The summary that ends each source's run in ``--json`` output."""
    return [event for event in run_events(stdout) if event["event"] == "summary"]


# -- the MCP server over HTTP, as a child process ----------------------------------

MCP_PROTOCOL = "2025-06-18"
MCP_ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@contextmanager
def mcp_http_server(
    db: Path,
    log: Path,
    *options: str,
    host: str = "127.0.0.1",
    profile: str = "core",
    env: dict[str, str] | None = None,
    cli: list[str] | None = None,
) -> Iterator[str]:
    """``researchstore serve --transport http`` on a free port of ``host``; yields its URL.

    Its stderr (the announcement, the server's own log and, unless
    ``--access-log`` says otherwise, the access log) goes to ``log``. ``cli``
    starts the command line another way (a program of ``tests/programs``).
    """
    command = [
        *(cli or CLI),
        "serve",
        str(db),
        "--transport",
        "http",
        "--host",
        host,
        "--port",
        "0",
    ]
    with open(log, "w") as errors:
        server = subprocess.Popen(
            [*command, "--profile", profile, *options],
            stdout=subprocess.DEVNULL,
            stderr=errors,
            env={**os.environ, **(env or {})},
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            found = re.search(r"at (http://\S+/mcp) ", log.read_text())
            if found:
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield found.group(1)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


@asynccontextmanager
async def mcp_http_session(url: str, key: str | None) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session over streamable HTTP with ``x-api-key``."""
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"x-api-key": key} if key is not None else {}
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(httpx.AsyncClient(headers=headers, timeout=60))
        read, write, _ = await stack.enter_async_context(
            streamable_http_client(url, http_client=client)
        )
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


def mcp_open_session(client: Any, url: str, key: str, **headers: str) -> Any:
    """POST an MCP ``initialize`` with ``key``: the response (a stateless server's has
    no session id; ``session_of`` reads it as ``""``)."""
    message = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": MCP_PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "1"},
        },
    }
    response = client.post(url, json=message, headers={**MCP_ACCEPT, "x-api-key": key, **headers})
    if response.status_code == 200:
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        client.post(url, json=notice, headers=mcp_headers(key, session_of(response)))
    return response


def session_of(response: Any) -> str:
    """The session id an ``initialize`` answer names, ``""`` for none (a stateless server)."""
    return str(response.headers.get("mcp-session-id", ""))


def mcp_headers(key: str, session_id: str) -> dict[str, str]:
    """The headers of a request in an open session (``""``: none)."""
    session = {"mcp-session-id": session_id} if session_id else {}
    return {**MCP_ACCEPT, "x-api-key": key, **session, "mcp-protocol-version": MCP_PROTOCOL}


def mcp_call(client: Any, url: str, key: str, session_id: str, tool: str, arguments: Any) -> Any:
    """POST a ``tools/call`` in an open session; the HTTP response."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    return client.post(url, json=message, headers=mcp_headers(key, session_id))


def forget_packed_indexes(db: Path) -> None:
    """Drop the copies of the indexes a store file keeps (as a store made before them)."""
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DELETE FROM index_files")
        conn.execute("DELETE FROM meta WHERE key LIKE '%_packed_%'")


# -- the web pages -------------------------------------------------------------

#: Text of the hostile report: markup that a page must show as text.
HOSTILE_TITLE = 'Hostile <script>alert("title")</script> & <b>bold</b> co'
HOSTILE_TEXT = (
    "The zebrafinch survey keeps <b>markup</b> as text. "
    "<script>window.pwned = 1</script> Tom & Jerry <img src=x onerror=alert(1)> "
    "and &lt;escaped&gt; stay as written."
)
#: How many reports mention herons (one chunk each): three pages of ten hits.
HERON_REPORTS = 25


def write_web_source(root: Path) -> None:
    """A source for the web pages: a hostile report, heron reports to page through,
    and a report to edit (``edit_web_source``) so that its chunk ids are replaced."""
    write_report(
        root,
        "hostile",
        title=HOSTILE_TITLE,
        date="2026-05-01",
        tags={"audience": "<i>staff</i>"},
        files={"notes.txt": HOSTILE_TEXT},
    )
    for number in range(HERON_REPORTS):
        write_report(
            root,
            f"herons/h{number:02d}",
            title=f"Heron count {number:02d}",
            date=f"2025-{1 + number % 12:02d}-{1 + number:02d}",
            tags={"season": "winter" if number % 2 else "summer"},
            files={"count.txt": f"A grey heron count number {number} at the marsh."},
        )
    write_report(
        root,
        "ledger",
        title="Apiary ledger",
        date="2026-04-01",
        tags={},
        files={"ledger.txt": long_text(8, seed=1)},
    )


def edit_web_source(root: Path) -> None:
    """Change the ledger's second paragraph (a re-ingest then replaces its chunks)."""
    path = root / "ledger" / "ledger.txt"
    paragraphs = path.read_text().split("\n\n")
    paragraphs[1] = "This paragraph was rewritten by the editor with new words."
    path.write_text("\n\n".join(paragraphs))


class Built:
    """A store of the bundled fixtures and ``write_web_source``, the ledger re-ingested
    after ``edit_web_source`` (so ``old_ledger``'s ids are replaced), and an API key."""

    def __init__(self, folder: Path) -> None:
        self.db = folder / "web.db"
        self.notes = folder / "notes"
        shutil.copytree(FIXTURE_SOURCE, folder / "fixtures")
        write_web_source(self.notes)
        from researchstore.reingest import reingest
        from researchstore.serving.auth import create_key

        with Library(self.db, progress=False) as store:
            store.ingest(folder / "fixtures", name="fixtures")
            store.ingest(self.notes, name="notes")
            ledger = ledger_chunks(store)
            edit_web_source(self.notes)
            (self.summary,) = reingest(store, source="notes")
            self.old_ledger = ledger
            self.new_ledger = ledger_chunks(store)
            self.key = create_key(store, scopes=(), workspaces=())


def ledger_chunks(store: Library) -> list[dict[str, Any]]:
    hits = store.search("ledger", limit=5)
    (report_id,) = {hit["report_id"] for hit in hits if hit["title"] == "Apiary ledger"}
    report = ok(store.call("research_get_report", {"report_id": report_id}))["report"]
    (document,) = report["documents"]
    window = ok(store.call("get_document_chunks", {"id": document["document_id"], "limit": 100}))
    chunks: list[dict[str, Any]] = window["chunks"]
    return chunks
