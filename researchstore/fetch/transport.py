"""The pinned, deadline-bound connection under httpx: the only place sockets are opened.

``PinnedBackend`` is an ``httpcore`` network backend that connects to the
addresses the guard checked, whatever name httpcore asks for, while the URL
keeps the name, so TLS SNI, certificate verification and ``Host`` all use
it. Every socket wait goes through the fetch's ``Guard`` (total deadline,
cancel event). ``PinnedTransport`` is httpx's own transport over a pool whose
only backend is that one.
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from researchstore.fetch.guard import Guard

__all__ = ["GuardedStream", "PinnedBackend", "PinnedTransport"]


class GuardedStream(httpcore.NetworkStream):
    """A socket whose every read and write honours the guard (deadline, cancel)."""

    def __init__(self, sock: socket.socket, guard: Guard) -> None:
        self._sock = sock
        self._guard = guard

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        started = time.monotonic()
        while True:
            left = None if timeout is None else timeout - (time.monotonic() - started)
            if left is not None and left <= 0:
                raise httpcore.ReadTimeout("read timed out")
            self._sock.settimeout(self._guard.wait(left))
            try:
                return self._sock.recv(max_bytes)
            except TimeoutError:
                continue  # woke up to look at the deadline and the cancel event
            except OSError as error:
                raise httpcore.ReadError(str(error)) from error

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        while buffer:
            self._sock.settimeout(self._guard.wait(timeout, poll=False))
            try:
                sent = self._sock.send(buffer)
            except TimeoutError as error:
                raise httpcore.WriteTimeout(str(error)) from error
            except OSError as error:
                raise httpcore.WriteError(str(error)) from error
            buffer = buffer[sent:]

    def close(self) -> None:
        self._sock.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        self._sock.settimeout(self._guard.wait(timeout, poll=False))
        try:
            tls = ssl_context.wrap_socket(self._sock, server_hostname=server_hostname)
        except TimeoutError as error:
            self._sock.close()
            self._guard.check()
            raise httpcore.ConnectTimeout(str(error)) from error
        except (ssl.SSLError, OSError) as error:
            self._sock.close()
            raise httpcore.ConnectError(str(error)) from error
        return GuardedStream(tls, self._guard)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object" and isinstance(self._sock, ssl.SSLSocket):
            # The TLS socket itself: it answers what an SSLObject does
            # (selected_alpn_protocol, getpeercert, version), without reading
            # the private object behind it.
            return self._sock
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "socket":
            return self._sock
        if info == "is_readable":
            return _is_readable(self._sock)
        return None


def _is_readable(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


class PinnedBackend(httpcore.NetworkBackend):
    """Connects to the checked addresses, whatever name httpcore asks for."""

    def __init__(self, host: str, port: int, addresses: list[str], guard: Guard) -> None:
        self._host = host
        self._port = port
        self._addresses = addresses
        self._guard = guard
        self.connected_to = ""
        #: Why the last connect failed (httpcore's pool drops the cause on re-raise).
        self.failure: OSError | None = None

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        if host.strip("[]").lower().rstrip(".") != self._host or port != self._port:
            # Only the checked origin is ever connected to (no proxy, no other host).
            raise httpcore.ConnectError(f"refusing to connect to unchecked {host}:{port}")
        last: OSError | None = None
        for address in self._addresses:
            try:
                sock = socket.create_connection(
                    (address, port), timeout=self._guard.wait(timeout, poll=False)
                )
            except TimeoutError as error:
                self._guard.check()
                last = self.failure = error
                continue
            except OSError as error:
                last = self.failure = error
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connected_to = address
            return GuardedStream(sock, self._guard)
        if isinstance(last, TimeoutError):
            raise httpcore.ConnectTimeout(str(last)) from last
        raise httpcore.ConnectError(str(last)) from last

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are never used for retrieval")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class PinnedTransport(httpx.HTTPTransport):
    """httpx's own transport over a pool whose only backend is ``PinnedBackend``."""

    def __init__(self, backend: PinnedBackend, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, trust_env=False, http2=False, retries=0)
        # httpx offers no switch for the network backend; replacing its pool
        # keeps httpx's request/response mapping and exception translation.
        self._pool.close()
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=1,
            max_keepalive_connections=0,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )
