"""Pages for people: the store at a glance, search, read, reports; each also JSON.

    app.py     the Starlette app: routes, HTML or JSON, errors, headers
    pages.py   each page as data: the tools' results and what a template needs
    auth.py    API keys for the pages served beside ``/mcp``: header or cookie
    templates  Jinja2, autoescaped; static/style.css, the one stylesheet

``researchstore web STORE`` serves them alone; ``researchstore serve
--transport http`` serves them under ``/web/`` behind the same API keys.
"""

from __future__ import annotations

from researchstore.web.app import web_app

__all__ = ["web_app"]
