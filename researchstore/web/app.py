"""The pages as one Starlette app: routes, HTML or JSON, errors, headers.

Routes (GET only; nothing any page does writes to the store)::

    /                  the store at a glance         (JSON: /index.json)
    /search?q=...      search, with the tool's filters and paging
    /document/ID       a document's chunks in order (?from=N for long ones)
    /chunk/ID          a chunk: its document at that chunk, or where a
                       replaced id's text lives now
    /reports           sources; ?source=S&folder=F lists a folder
    /report/ID         a report and its documents

Every page is JSON too, with ``.json`` after its path (``/search.json?q=...``,
``/document/ID.json``) or ``Accept: application/json``: ``{"result": {...}}``
holding the tools' results under the names the tools give them, or the
tools' ``{"error": {...}}`` with a 4xx (5xx) status. Templates are Jinja2
with autoescape on: page text is untrusted, and is only ever escaped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import anyio
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from researchstore.errors import ResearchStoreError
from researchstore.principal import LOCAL_USER, Principal, acting_as
from researchstore.serving.hosts import HostGuard
from researchstore.storage.stored import json_default
from researchstore.web import auth
from researchstore.web.pages import (
    OverviewCache,
    Page,
    PageError,
    chunk_page,
    document_page,
    home_page,
    report_page,
    reports_page,
    search_page,
)

if TYPE_CHECKING:
    from researchstore.library import Library

log = logging.getLogger("researchstore.web")

#: What the pages may load: their own stylesheet, nothing else; no scripts at all.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


def web_app(store: Library, *, require_key: bool = False, host: str = "127.0.0.1") -> Starlette:
    """The pages of ``store``; with ``require_key``, each needs a live API key.

    Bound to a loopback ``host``, only requests naming this machine by a
    loopback name are answered (a page of another site reaching the port
    through a name it controls is refused): ``hosts.HostGuard``, as under
    ``serve``.
    """
    templates = Environment(
        loader=PackageLoader("researchstore.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters["clock"] = clock
    pages = Pages(store, templates, require_key=require_key)
    routes = [
        Route("/", pages.handler(pages.home)),
        Route("/index.json", pages.handler(pages.home)),
        Route("/search", pages.handler(pages.search)),
        Route("/search.json", pages.handler(pages.search)),
        Route("/document/{ident}", pages.handler(pages.document)),
        Route("/chunk/{ident}", pages.handler(pages.chunk)),
        Route("/reports", pages.handler(pages.reports)),
        Route("/reports.json", pages.handler(pages.reports)),
        Route("/report/{ident}", pages.handler(pages.report)),
        Route("/static/style.css", stylesheet),
        Route("/login", pages.login, methods=["GET", "POST"]),
        Route("/logout", pages.logout),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(HostGuard, bound=host)],
        exception_handlers={HTTPException: pages.http_error},
    )
    return app


PageBuilder = Callable[[Request], Page]


class Pages:
    """The app's handlers: each builds its page in a worker thread and renders it."""

    def __init__(self, store: Library, templates: Environment, *, require_key: bool) -> None:
        self.store = store
        self.templates = templates
        self.require_key = require_key
        self.cache = OverviewCache()

    # -- the pages -------------------------------------------------------

    def home(self, request: Request, principal: Principal) -> Page:
        return home_page(self.store, self.cache, principal)

    def search(self, request: Request, principal: Principal) -> Page:
        params = request.query_params.multi_items()
        return search_page(self.store, self.cache, principal, params)

    def document(self, request: Request, principal: Principal) -> Page:
        return document_page(self.store, ident(request), request.query_params.get("from", ""))

    def chunk(self, request: Request, principal: Principal) -> Page:
        return chunk_page(self.store, ident(request))

    def reports(self, request: Request, principal: Principal) -> Page:
        query = request.query_params
        return reports_page(
            self.store,
            self.cache,
            principal,
            source=query.get("source", ""),
            folder=query.get("folder", ""),
            page_text=query.get("page", ""),
        )

    def report(self, request: Request, principal: Principal) -> Page:
        return report_page(self.store, ident(request))

    # -- answering -------------------------------------------------------

    def handler(
        self, build: Callable[[Request, Principal], Page]
    ) -> Callable[[Request], Awaitable[Response]]:
        """An endpoint: the caller checked, the page built off the event loop, then rendered."""

        async def endpoint(request: Request) -> Response:
            as_json = wants_json(request)
            principal = LOCAL_USER
            if self.require_key:
                key = auth.presented_key(request)
                found = await anyio.to_thread.run_sync(auth.principal_of, self.store, key)
                if found is None:
                    return self.refuse(request, key, as_json=as_json)
                principal = found

            def run() -> Response:
                with acting_as(principal):
                    try:
                        return self.answer(request, build(request, principal), as_json=as_json)
                    except PageError as error:
                        return self.error(request, error, as_json=as_json)
                    except ResearchStoreError as error:  # a damaged store file, say
                        failed = PageError.from_envelope(error.to_envelope())
                        return self.error(request, failed, as_json=as_json)
                    except Exception as error:  # a page never answers with a traceback
                        log.exception("the page %s failed", request.url.path)
                        failed = PageError(
                            500, "internal", f"{type(error).__name__}: {error}", title="Error"
                        )
                        return self.error(request, failed, as_json=as_json)

            return await anyio.to_thread.run_sync(run)

        return endpoint

    def answer(self, request: Request, page: Page, *, as_json: bool) -> Response:
        if page.failure is not None:
            if as_json:
                return self.error(request, page.failure, as_json=True)
            context = {**page.data, **page.context, "failure": page.failure.envelope["error"]}
            return self.html(request, page.template, context, page.failure.status)
        if as_json:
            return json_response({"result": page.data}, 200)
        if page.redirect is not None:
            return RedirectResponse(base(request) + page.redirect, status_code=303)
        return self.html(request, page.template, {**page.data, **page.context})

    def html(
        self, request: Request, template: str, context: dict[str, Any], status: int = 200
    ) -> Response:
        shared = {
            "failure": None,
            "base": base(request),
            "signed_in": self.require_key,
            "read_only": self.store.read_only_reason,
        }
        body = self.templates.get_template(template).render({**shared, **context})
        return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)

    def error(self, request: Request, error: PageError, *, as_json: bool) -> Response:
        if as_json:
            return json_response(error.envelope, error.status)
        context = {"title": error.title, "error": error.envelope["error"], "status": error.status}
        return self.html(request, "error.html", context, error.status)

    async def http_error(self, request: Request, error: Exception) -> Response:
        """An unknown path (404) or a method other than GET (405), as a page or JSON."""
        status = error.status_code if isinstance(error, HTTPException) else 500
        message = {404: "there is no such page", 405: "the pages only answer GET"}
        page_error = PageError(
            status, "invalid_input", message.get(status, "the request was refused")
        )
        return self.error(request, page_error, as_json=wants_json(request))

    # -- keys ------------------------------------------------------------

    def refuse(self, request: Request, key: str | None, *, as_json: bool) -> Response:
        """401: as JSON, the envelope ``/mcp`` gives; as a page, the login form."""
        message = (
            "an API key is required: send it in the x-api-key header, or sign in"
            if key is None
            else "the API key is not valid (wrong or revoked)"
        )
        if as_json:
            body = {"error": {"code": "not_entitled", "message": message}}
            return json_response(body, 401)
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return self.login_page(request, message, target[len(base(request)) :] or "/", 401)

    def login_page(
        self, request: Request, message: str | None, target: str, status: int
    ) -> Response:
        context = {"title": "Sign in", "message": message, "next": target}
        response = self.html(request, "login.html", context, status)
        response.headers["www-authenticate"] = 'ApiKey header="x-api-key"'
        return response

    async def login(self, request: Request) -> Response:
        """GET: the form; POST: check the key, set the cookie, go back to the page."""
        if not self.require_key:
            return RedirectResponse(base(request) + "/", status_code=303)
        if request.method == "GET":
            target = auth.safe_next(request.query_params.get("next", "/"))
            return self.login_page(request, None, target, 200)
        key, target = await auth.login_form(request)
        principal = await anyio.to_thread.run_sync(auth.principal_of, self.store, key or None)
        if principal is None:
            return self.login_page(request, "that key is not valid (wrong or revoked)", target, 401)
        response = RedirectResponse(base(request) + target, status_code=303)
        response.set_cookie(
            auth.COOKIE, key, path=base(request) or "/", httponly=True, samesite="strict"
        )
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse(base(request) + "/login", status_code=303)
        response.delete_cookie(auth.COOKIE, path=base(request) or "/")
        return response


def ident(request: Request) -> str:
    """The id in the path, without the ``.json`` that asks for JSON."""
    value: str = request.path_params["ident"]
    return value.removesuffix(".json")


def wants_json(request: Request) -> bool:
    """``.json`` after the path, or an Accept header that prefers JSON to HTML."""
    if request.url.path.endswith(".json"):
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def base(request: Request) -> str:
    """Where the pages are mounted ("" at the root, ``/web`` under ``serve``)."""
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


def json_response(body: dict[str, Any], status: int) -> Response:
    # As JSONResponse renders, bytes a store file holds where text belongs included.
    content = json.dumps(
        body, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=json_default
    )
    return Response(
        content,
        status_code=status,
        media_type="application/json",
        headers={"x-content-type-options": "nosniff"},
    )


STYLESHEET = files("researchstore.web").joinpath("static/style.css").read_bytes()


async def stylesheet(request: Request) -> Response:
    return Response(
        STYLESHEET,
        media_type="text/css",
        headers={"cache-control": "max-age=3600", "x-content-type-options": "nosniff"},
    )


def clock(ms: int | None) -> str:
    """Milliseconds as a caption time: ``m:ss`` or ``h:mm:ss``; none for anything else
    (a store file from elsewhere may hold any value there)."""
    if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
        return ""
    seconds = ms // 1000
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
