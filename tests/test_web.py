"""The pages for people (``researchstore.web``), driven in process with Starlette's client.

Every page as HTML and as JSON (the tools' shapes), paging, filters, a
replaced chunk id, escaping of hostile page text, errors as 4xx pages,
read-only stores, and the pages under ``serve`` behind the API keys.
The same pages in a real browser: ``test_web_browser.py``.
"""

from __future__ import annotations

import io
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import HERON_REPORTS, HOSTILE_TITLE, Built, ledger_chunks, ok, write_web_source
from starlette.testclient import TestClient

from researchstore import Store
from researchstore.reingest import reingest
from researchstore.serving.auth import create_key, revoke_key
from researchstore.web import auth as web_auth
from researchstore.web import web_app
from researchstore.web.pages import snippet_parts

BASE = "http://127.0.0.1"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory.mktemp("web"))


@pytest.fixture(scope="module")
def web_store(built: Built) -> Iterator[Store]:
    with Store(built.db, progress=False) as store:
        yield store


@pytest.fixture(scope="module")
def client(web_store: Store) -> Iterator[TestClient]:
    with TestClient(web_app(web_store), base_url=BASE) as running:
        yield running


def json_of(client: TestClient, url: str, status: int = 200) -> Any:
    response = client.get(url)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


def first_hit(client: TestClient, query: str) -> dict[str, Any]:
    hit: dict[str, Any] = json_of(client, f"/search.json?q={query}")["result"]["hits"][0]
    return hit


# -- the store at a glance ------------------------------------------------------


@pytest.mark.slow
def test_the_home_page_shows_sources_counts_runs_statuses_and_the_index(
    client: TestClient, web_store: Store, built: Built
) -> None:
    overview = json_of(client, "/index.json")["result"]
    totals = overview["overview"]["totals"]
    with web_store.reading() as conn:
        assert totals["chunks"] == conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        assert totals["documents"] == conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        assert totals["reports"] == conn.execute("SELECT count(*) FROM reports").fetchone()[0]
    sources = {source["name"]: source for source in overview["overview"]["sources"]}
    assert set(sources) == {"fixtures", "notes"}
    assert sources["notes"]["root"] == str(built.notes)
    assert sources["notes"]["last_run"]["version_id"] == built.summary.version_id
    assert sources["notes"]["last_run"]["summary"]["modified"] == 1
    statuses = overview["overview"]["documents_by_status"]
    assert {"partial", "invalid", "empty"} <= set(statuses)
    assert all(document["reason"] for document in statuses["invalid"]["documents"])
    assert overview["index"]["word_index"]["documents"] > 0
    assert overview["index"]["modes"] == ["keyword"]

    page = client.get("/")
    assert page.status_code == 200
    assert str(built.notes) in page.text
    assert "invalid_captions" in page.text and "no_text" in page.text
    assert f"{totals['chunks']:,}" in page.text
    # The same page for a client that asks for JSON by its Accept header.
    assert client.get("/", headers={"accept": "application/json"}).json() == {"result": overview}


def test_the_overview_is_read_again_only_when_the_store_changes(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    write_web_source(root)
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(root, name="notes")
        with TestClient(web_app(store), base_url=BASE) as client:
            before = json_of(client, "/index.json")["result"]["overview"]["totals"]
            assert json_of(client, "/index.json")["result"]["overview"]["totals"] == before
            (root / "late.txt").write_text("A late heron arrived at the marsh.")
            reingest(store)
            after = json_of(client, "/index.json")["result"]["overview"]["totals"]
    assert after["reports"] == before["reports"] + 1
    assert after["chunks"] == before["chunks"] + 1


# -- search --------------------------------------------------------------------


@pytest.mark.slow
def test_search_shows_hits_with_titles_dates_marked_snippets_and_tags(
    client: TestClient, web_store: Store
) -> None:
    found = json_of(client, "/search.json?q=varroa+mites")["result"]
    assert found["hits"] and found["mode"] == "keyword"
    tool = ok(web_store.call("research_chunk_search", {"query": "varroa mites", "limit": 10}))
    assert found["hits"] == tool["hits"]
    page = client.get("/search?q=varroa+mites")
    assert page.status_code == 200
    hit = found["hits"][0]
    assert f'href="/chunk/{hit["chunk_id"]}"' in page.text
    assert hit["date"] in page.text
    assert re.search(r"<mark>varroa</mark>", page.text, re.IGNORECASE)
    assert "<b>" not in page.text.split("<main>")[1]  # the tool's marks are never passed on
    assert "students" in page.text  # a tag of the hit's report


def test_caption_hits_show_their_time_range(client: TestClient) -> None:
    hits = json_of(client, "/search.json?q=soil&kind=vtt")["result"]["hits"]
    assert hits and all(hit["kind"] == "vtt" for hit in hits)
    hit = hits[0]
    page = client.get("/search?q=soil&kind=vtt").text
    minutes, seconds = divmod(hit["start_ms"] // 1000, 60)
    assert f"{minutes}:{seconds:02d}–" in page


def test_filters_are_form_fields_and_narrow_the_hits(client: TestClient) -> None:
    summer = json_of(client, "/search.json?q=heron&tag.season=summer&source=notes")["result"]
    assert summer["hits"] and all(hit["tags"]["season"] == "summer" for hit in summer["hits"])
    dated = json_of(client, "/search.json?q=heron&date_from=2025-06-01&date_to=2025-08-31")
    assert dated["result"]["hits"]
    assert all("2025-06-01" <= hit["date"] <= "2025-08-31" for hit in dated["result"]["hits"])
    form = client.get("/search?q=heron&tag.season=summer").text
    assert '<select name="tag.season">' in form
    assert '<option value="summer" selected>' in form
    assert '<select name="source">' in form and '<select name="kind">' in form
    # No vectors in this store: no mode to choose.
    assert 'name="mode"' not in form


def test_search_pages_through_the_hits_with_query_parameters(client: TestClient) -> None:
    pages = [
        json_of(client, f"/search.json?q=heron&source=notes&page={n}")["result"] for n in (1, 2, 3)
    ]
    ids = [hit["chunk_id"] for page in pages for hit in page["hits"]]
    assert [len(page["hits"]) for page in pages] == [10, 10, HERON_REPORTS - 20]
    assert len(set(ids)) == HERON_REPORTS
    assert [page["page"]["has_next"] for page in pages] == [True, True, False]
    second = client.get("/search?q=heron&source=notes&page=2").text
    assert 'href="/search?q=heron&amp;source=notes&amp;page=3"' in second
    assert 'href="/search?q=heron&amp;source=notes"' in second  # back to page 1
    assert '<ol class="hits" start="11">' in second


def test_an_empty_query_shows_the_form_and_bad_input_is_a_400(client: TestClient) -> None:
    empty = client.get("/search")
    assert empty.status_code == 200 and '<form class="search"' in empty.text
    for url, field in [
        ("/search.json?q=heron&date_from=2025-13-45", "date_from"),
        ("/search.json?q=heron&page=0", "page"),
        ("/search.json?q=heron&page=6", "page"),
        ("/search.json?q=heron&kind=pdf", "kind"),
        ("/search.json?q=heron&report_id=x", "report_id"),
    ]:
        error = json_of(client, url, 400)["error"]
        assert error["code"] == "invalid_input" and error["field"] == field, (url, error)
    page = client.get("/search?q=heron&date_from=nope")
    assert page.status_code == 400 and "date_from" in page.text
    # The form stays, filled in, above the error.
    assert '<form class="search"' in page.text and 'value="nope"' in page.text
    assert "Traceback" not in page.text


# -- reading -------------------------------------------------------------------


def test_a_document_shows_its_chunks_in_order_with_anchors_crumbs_and_siblings(
    client: TestClient, web_store: Store
) -> None:
    hit = first_hit(client, "varroa&source=fixtures")
    document = ok(web_store.call("get_document", {"id": hit["document_id"]}))["document"]
    data = json_of(client, f"/document/{hit['document_id']}.json")["result"]
    assert data["document"] == document
    assert [chunk["position"] for chunk in data["window"]["chunks"]] == list(
        range(document["total_chunks"])
    )
    page = client.get(f"/document/{hit['document_id']}").text
    anchors = re.findall(r'id="chunk-([0-9a-f-]+)"', page)
    assert anchors == [chunk["chunk_id"] for chunk in document["chunks"]]
    # Breadcrumbs: source, its folders, then the report.
    crumbs = page.split('<nav class="crumbs">')[1].split("</nav>")[0]
    assert [name for name in re.findall(r">([^<>]+)</a>", crumbs)] == [
        "fixtures",
        "field-studies",
        "2026",
        hit["title"],
    ]
    report = data["report"]
    names = [other["document_id"] for other in report["documents"]]
    at = names.index(hit["document_id"])
    if at > 0:
        assert f'rel="prev" href="/document/{names[at - 1]}"' in page
    if at + 1 < len(names):
        assert f'rel="next" href="/document/{names[at + 1]}"' in page


def test_a_chunk_link_opens_its_document_at_that_chunk(client: TestClient) -> None:
    hit = first_hit(client, "varroa&source=fixtures")
    response = client.get(f"/chunk/{hit['chunk_id']}", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == (
        f"/document/{hit['document_id']}#chunk-{hit['chunk_id']}"
    )
    resolution = json_of(client, f"/chunk/{hit['chunk_id']}.json")["result"]["resolution"]
    assert resolution["status"] == "current"
    assert resolution["chunks"][0]["chunk_id"] == hit["chunk_id"]


def test_caption_chunks_show_their_times(client: TestClient) -> None:
    hit = first_hit(client, "soil&kind=vtt")
    page = client.get(f"/document/{hit['document_id']}").text
    assert (
        page.count('<span class="time">')
        == json_of(client, f"/document/{hit['document_id']}.json")["result"]["document"][
            "total_chunks"
        ]
    )


def test_a_replaced_chunk_id_shows_where_its_text_lives_now(
    client: TestClient, web_store: Store, built: Built
) -> None:
    old = built.old_ledger[-1]
    expected = ok(web_store.call("research_resolve_chunk", {"chunk_id": old["chunk_id"]}))
    data = json_of(client, f"/chunk/{old['chunk_id']}.json")["result"]
    assert data == expected
    resolution = data["resolution"]
    assert resolution["status"] == "replaced"
    assert resolution["replaced_by_run"] == built.summary.version_id
    page = client.get(f"/chunk/{old['chunk_id']}")
    assert page.status_code == 200
    assert built.summary.version_id in page.text and resolution["replaced_at"] in page.text
    for chunk in resolution["chunks"]:
        assert f'href="/chunk/{chunk["chunk_id"]}"' in page.text
    assert {chunk["chunk_id"] for chunk in resolution["chunks"]} <= {
        chunk["chunk_id"] for chunk in built.new_ledger
    }


def test_a_gone_chunk_says_its_content_is_gone(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    write_web_source(root)
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(root, name="notes")
        chunk_id = ledger_chunks(store)[0]["chunk_id"]
        shutil.rmtree(root / "ledger")
        reingest(store)
        with TestClient(web_app(store), base_url=BASE) as client:
            resolution = json_of(client, f"/chunk/{chunk_id}.json")["result"]["resolution"]
            page = client.get(f"/chunk/{chunk_id}").text
    assert resolution["status"] == "gone"
    assert "content is gone" in page and resolution["reason"] in page


def test_unknown_ids_and_paths_are_404_pages_and_json(client: TestClient) -> None:
    unknown = "01a22bb1-0000-7000-8000-000000000000"
    for path in (f"/chunk/{unknown}", f"/document/{unknown}", "/report/999999", "/nothing"):
        page = client.get(path)
        assert page.status_code == 404, path
        assert page.headers["content-type"].startswith("text/html")
        assert "Traceback" not in page.text
        error = json_of(client, path + ".json", 404)
        assert error["error"]["code"] == "invalid_input"
    assert json_of(client, "/report/abc.json", 400)["error"]["field"] == "report_id"
    assert json_of(client, "/document/x.json?from=-1", 400)["error"]["field"] == "from"
    assert json_of(client, "/reports.json?source=nope", 404)["error"]["code"] == "invalid_input"


def test_pages_only_answer_get(client: TestClient) -> None:
    for path in ("/", "/search", "/reports"):
        assert client.post(path).status_code == 405
        assert client.delete(path).status_code == 405


# -- reports -------------------------------------------------------------------


def test_reports_are_listed_by_source_and_folder_and_paged(client: TestClient) -> None:
    sources = json_of(client, "/reports.json")["result"]["sources"]
    assert {source["name"] for source in sources} == {"fixtures", "notes"}
    root = json_of(client, "/reports.json?source=notes")["result"]["listing"]
    assert [folder["path"] for folder in root["folders"]] == ["herons"]
    assert {report["key"] for report in root["reports"]} == {"hostile", "ledger"}
    herons = json_of(client, "/reports.json?source=notes&folder=herons")["result"]["listing"]
    assert herons["total_reports"] == HERON_REPORTS and len(herons["reports"]) == HERON_REPORTS
    first = herons["reports"][0]
    assert (first["key"], first["tags"], first["date"]) == (
        "herons/h00",
        {"season": "summer"},
        "2025-01-01",
    )
    page = client.get("/reports?source=notes&folder=herons").text
    assert f'href="/report/{first["report_id"]}"' in page and "2025-01-01" in page
    fixtures = client.get("/reports?source=fixtures&folder=field-studies").text
    assert 'href="/reports?source=fixtures&amp;folder=field-studies%2F2026"' in fixtures


def test_a_report_page_lists_its_documents(client: TestClient, web_store: Store) -> None:
    hit = first_hit(client, "varroa&source=fixtures")
    report = ok(web_store.call("research_get_report", {"report_id": hit["report_id"]}))
    assert json_of(client, f"/report/{hit['report_id']}.json")["result"] == report
    page = client.get(f"/report/{hit['report_id']}").text
    for document in report["report"]["documents"]:
        assert f'href="/document/{document["document_id"]}"' in page


# -- untrusted text ------------------------------------------------------------


def test_markup_in_page_text_is_shown_as_text_everywhere(client: TestClient) -> None:
    hit = first_hit(client, "zebrafinch")
    assert hit["title"] == HOSTILE_TITLE
    pages = [
        client.get("/search?q=zebrafinch").text,
        client.get(f"/document/{hit['document_id']}").text,
        client.get(f"/report/{hit['report_id']}").text,
        client.get("/reports?source=notes").text,
        client.get("/search?q=zebrafinch&tag.audience=%3Ci%3Estaff%3C/i%3E").text,
    ]
    for page in pages:
        assert "<script" not in page and "<img" not in page and "<i>" not in page
        assert "&lt;script&gt;" in page
    document = pages[1]
    assert "&lt;b&gt;markup&lt;/b&gt;" in document
    assert "Tom &amp; Jerry" in document
    # Text that looks escaped stays as written: it is escaped once more, never decoded.
    assert "&amp;lt;escaped&amp;gt;" in document
    assert "<mark>zebrafinch</mark>" in pages[0]


@pytest.mark.parametrize(
    ("snippet", "parts"),
    [
        ("<b>bees</b> fly", [("bees", True), (" fly", False)]),
        (
            "a &lt;b&gt; <b>bee</b> &amp;amp;",
            [("a <b> ", False), ("bee", True), (" &amp;", False)],
        ),
        ("no marks", [("no marks", False)]),
    ],
    ids=["marked", "escaped-markup", "plain"],
)
def test_snippets_are_cut_at_the_marks_and_unescaped_once(
    snippet: str, parts: list[tuple[str, bool]]
) -> None:
    assert snippet_parts(snippet) == parts


def test_pages_forbid_scripts_and_framing(client: TestClient) -> None:
    headers = client.get("/").headers
    assert "script-src" not in headers["content-security-policy"]
    assert "default-src 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"


def test_a_page_for_another_host_name_is_refused(client: TestClient) -> None:
    assert client.get("/", headers={"host": "rebound.example"}).status_code == 421


# -- read-only stores ----------------------------------------------------------


def test_every_page_works_on_a_read_only_store(built: Built, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    shutil.copy(built.db, copy)
    before = copy.read_bytes()
    with Store(copy, progress=False, read_only=True) as store:
        assert store.read_only
        with TestClient(web_app(store), base_url=BASE) as client:
            hit = first_hit(client, "varroa&source=fixtures")
            for path in (
                "/",
                "/search?q=varroa",
                f"/document/{hit['document_id']}",
                f"/chunk/{built.old_ledger[-1]['chunk_id']}",
                "/reports?source=notes",
                f"/report/{hit['report_id']}",
            ):
                response = client.get(path)
                assert response.status_code == 200, (path, response.text)
                assert "read-only" in response.text
    assert copy.read_bytes() == before


# -- under serve: the API keys -------------------------------------------------


@pytest.fixture(scope="module")
def served(web_store: Store) -> Iterator[TestClient]:
    from researchstore.serving.mcp_server import http_app

    pages = web_app(web_store, require_key=True)
    app = http_app(web_store, pages=pages, access_log=io.StringIO())
    with TestClient(app, base_url=BASE) as running:
        yield running


def test_under_serve_pages_need_the_api_key(served: TestClient, built: Built) -> None:
    refused = served.get("/web/search?q=varroa")
    assert refused.status_code == 401
    assert '<form class="login"' in refused.text
    assert 'name="next" value="/search?q=varroa"' in refused.text
    error = served.get("/web/search.json?q=varroa").json()["error"]
    assert error["code"] == "not_entitled"
    assert served.get("/web/", headers={"x-api-key": "rs_wrong"}).status_code == 401
    # A program sends the header, as to /mcp.
    allowed = served.get("/web/search.json?q=varroa", headers={"x-api-key": built.key})
    assert allowed.status_code == 200 and allowed.json()["result"]["hits"]
    assert built.key not in allowed.text
    # /mcp keeps its own check.
    assert served.post("/mcp", json={}).status_code == 401


def test_under_serve_a_person_signs_in_once_and_gets_a_cookie(
    served: TestClient, built: Built, web_store: Store
) -> None:
    served.cookies.clear()
    wrong = served.post("/web/login", data={"key": "rs_nope", "next": "/"})
    assert wrong.status_code == 401 and "rs_nope" not in wrong.text
    signed = served.post(
        "/web/login", data={"key": built.key, "next": "/search?q=varroa"}, follow_redirects=False
    )
    assert signed.status_code == 303
    assert signed.headers["location"] == "/web/search?q=varroa"
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/web" in cookie
    page = served.get("/web/search?q=varroa")
    assert page.status_code == 200 and "<mark>" in page.text
    assert built.key not in page.text
    hit = page.text.split('href="/web/chunk/')[1].split('"')[0]
    assert served.get(f"/web/chunk/{hit}").status_code == 200  # the redirect stays under /web
    # Another site's address is never where a sign-in leads.
    away = served.post(
        "/web/login", data={"key": built.key, "next": "//evil.example/"}, follow_redirects=False
    )
    assert away.headers["location"] == "/web/"
    served.get("/web/logout")
    assert served.get("/web/").status_code == 401


def test_under_serve_a_revoked_key_is_refused_at_once(web_store: Store) -> None:
    from researchstore.serving.mcp_server import http_app

    key = create_key(web_store, scopes=(), workspaces=())
    app = http_app(web_store, pages=web_app(web_store, require_key=True), access_log=io.StringIO())
    with TestClient(app, base_url=BASE) as client:
        assert client.get("/web/", headers={"x-api-key": key}).status_code == 200
        assert revoke_key(web_store, key_id_of(web_store, key))
        assert client.get("/web/", headers={"x-api-key": key}).status_code == 401


def key_id_of(store: Store, key: str) -> str:
    from researchstore.serving.auth import authenticate

    principal = authenticate(store, key, touch=False)
    assert principal is not None and principal.key_id
    return principal.key_id


def test_the_pages_read_the_key_from_the_header_mcp_reads() -> None:
    from researchstore.serving.mcp_server import API_KEY_HEADER

    assert web_auth.API_KEY_HEADER == API_KEY_HEADER


def test_the_pages_are_package_data() -> None:
    from importlib.resources import files

    folder = files("researchstore.web")
    for name in ("base.html", "home.html", "search.html", "document.html", "chunk.html"):
        assert folder.joinpath("templates", name).is_file(), name
    assert folder.joinpath("static", "style.css").is_file()
    text = Path(__file__).resolve().parent.parent.joinpath("pyproject.toml").read_text()
    assert '"web/templates/*.html"' in text and '"web/static/*.css"' in text


def test_a_key_sees_only_the_evidence_of_its_own_workspaces(filled_store: Store) -> None:
    from helpers import OTHER_WORKSPACE, WORKSPACE

    from researchstore.serving.mcp_server import http_app

    with filled_store.transaction() as conn:
        for workspace in (WORKSPACE, OTHER_WORKSPACE):
            conn.execute(
                "INSERT INTO sources (name, kind, created_at) VALUES (?, 'workspace', '2026')",
                (f"workspace:{workspace}",),
            )
    mine = create_key(filled_store, scopes=("agent:research",), workspaces=(WORKSPACE,))
    plain = create_key(filled_store, scopes=(), workspaces=())
    pages = web_app(filled_store, require_key=True)
    app = http_app(filled_store, pages=pages, access_log=io.StringIO())
    with TestClient(app, base_url=BASE) as client:

        def sources(key: str, path: str = "/web/index.json") -> set[str]:
            overview = client.get(path, headers={"x-api-key": key}).json()["result"]
            listed = (
                overview["overview"]["sources"] if "overview" in overview else overview["sources"]
            )
            return {source["name"] for source in listed}

        assert sources(mine) == {"field", f"workspace:{WORKSPACE}"}
        assert sources(mine, "/web/reports.json") == {"field", f"workspace:{WORKSPACE}"}
        assert sources(plain) == {"field"}
        hidden = client.get(
            f"/web/reports.json?source=workspace:{OTHER_WORKSPACE}", headers={"x-api-key": mine}
        )
        assert hidden.status_code == 404
    with TestClient(web_app(filled_store), base_url=BASE) as local:
        overview = local.get("/index.json").json()["result"]["overview"]
        assert len(overview["sources"]) == 3  # the local user sees every workspace
