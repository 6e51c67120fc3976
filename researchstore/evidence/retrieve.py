"""Evidence retrieval: durable receipts, bounded public reads, workspace evidence.

``retrieve`` is the body of the ``research_evidence_retrieve`` tool (seed
002; its contract is ``evidence.spec``). One call, keyed by
``(workspace_id, mutation_id)``:

1. **Receipt** (``receipts``). In one write transaction the receipt is
   looked up. The same arguments again return it without fetching; other
   arguments are ``invalid_input``. A receipt past ``valid_until`` reads
   ``expired``; one still ``running`` whose process is gone (or that has run
   far past any deadline) becomes ``unconfirmed``. A new call writes its
   receipt as ``running`` (with this process's identity) before anything is
   fetched.
2. **Fetch and read** (``content``), through the configuration's
   ``Fetcher`` (by default ``researchstore.fetch.client.fetch``: https only,
   public addresses only, pinned, bounded in bytes and time). ``url_text``
   reads a page's main text with the ingest parsers; ``published_captions``
   reads a WebVTT / SubRip file, or the file a page's
   ``<track kind="captions|subtitles">`` names (chosen by ``language``).
3. **Settle** (``records``). A ``ready`` or ``partial`` result becomes
   evidence: a report in the workspace's source (kind ``workspace``), one
   document, chunked and indexed like any other, with ``evidence_id`` stable
   per workspace, URL, kind and language and a ``revision`` that rises when
   the content changes. Evidence and receipt are written in one transaction,
   so a crash leaves either both or a ``running`` receipt (read later as
   ``unconfirmed``).

Evidence is indexed under its workspace: ``research_chunk_search`` finds it
only when asked for that ``workspace_id`` (and never without one). The text
is untrusted: it is returned and stored as data, never followed.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from typing import TYPE_CHECKING, Any

from researchstore.errors import InvalidInput
from researchstore.evidence.config import RetrievalConfig
from researchstore.evidence.content import read_content
from researchstore.evidence.outcome import Outcome
from researchstore.evidence.receipts import (
    ReceiptKey,
    discard_running,
    open_receipt,
    payload,
    release,
    settle,
)
from researchstore.evidence.records import write_evidence
from researchstore.evidence.spec import (
    KINDS,
    LANGUAGE_PATTERN,
    MAX_LANGUAGE_LENGTH,
    MAX_URL_LENGTH,
)
from researchstore.fetch.client import fetch
from researchstore.fetch.fetcher import Fetcher
from researchstore.storage.dates import stamp

if TYPE_CHECKING:
    from researchstore.store import Store

__all__ = ["retrieve"]


def retrieve(
    store: Store,
    *,
    url: str,
    kind: str,
    workspace_id: str,
    mutation_id: str,
    language: str | None = None,
    config: RetrievalConfig | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Run (or replay) one retrieval; returns seed 002's ``{"retrieval": ...}``.

    ``config`` defaults to the store's (``Library(retrieval=...)``), else to
    ``RetrievalConfig.from_env()``. Setting ``cancel`` stops the fetch; the
    receipt then settles ``cancelled``.
    """
    # The setting is a ``Library``'s: a bare ``store.Store`` carries none.
    config = config or getattr(store, "retrieval", None) or RetrievalConfig.from_env()
    workspace_id = _canonical_uuid(workspace_id, "workspace_id")
    mutation_id = _canonical_uuid(mutation_id, "mutation_id")
    _check_arguments(url, kind, language)
    arguments = json.dumps({"url": url, "kind": kind, "language": language}, sort_keys=True)
    key = ReceiptKey(str(store.path.resolve()), workspace_id, mutation_id)
    row, fresh = open_receipt(store, key, arguments, kind, config)
    if not fresh:
        return {"retrieval": payload(row)}
    fetcher: Fetcher = config.fetcher or fetch
    try:
        try:
            outcome = read_content(
                url, kind, language, fetcher=fetcher, config=config, cancel=cancel
            )
        except KeyboardInterrupt:
            cancelled = Outcome(kind, "cancelled", "cancelled", retrieved_at=stamp(config.clock()))
            settle(store, row, cancelled, None, config)
            raise
        evidence = None
        with store.writing(wait=True):
            with store.transaction() as conn:
                if outcome.status in ("ready", "partial"):
                    evidence = write_evidence(
                        store,
                        conn,
                        workspace_id=workspace_id,
                        url=url,
                        kind=kind,
                        language=language,
                        outcome=outcome,
                        config=config,
                    )
                row = settle(store, row, outcome, evidence, config)
            store.sync_index(wait=True)
        return {"retrieval": payload(row)}
    except BaseException:
        # An error (not a crash) leaves no receipt behind: the call can be retried.
        discard_running(store, row["id"])
        raise
    finally:
        release(key)


def _canonical_uuid(value: str, name: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise InvalidInput(f"{name}: must be a UUID; got {str(value)[:60]!r}", field=name) from None


def _check_arguments(url: str, kind: str, language: str | None) -> None:
    if kind not in KINDS:
        raise InvalidInput(f"kind: must be one of {', '.join(KINDS)}; got {kind!r}", field="kind")
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise InvalidInput(
            f"url: must be a URI of at most {MAX_URL_LENGTH} characters", field="url"
        )
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$", url):
        raise InvalidInput(f"url: must be an absolute URI; got {url[:100]!r}", field="url")
    if language is not None and (
        not re.match(LANGUAGE_PATTERN, language) or len(language) > MAX_LANGUAGE_LENGTH
    ):
        raise InvalidInput(
            f"language: must be a language tag such as en or nb-NO; got {language[:40]!r}",
            field="language",
        )
