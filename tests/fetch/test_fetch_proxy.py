"""The standard proxy variables reach libcurl: an https download goes through the CONNECT
proxy that https_proxy names, and no_proxy still bypasses it."""

from __future__ import annotations

import socket
import socketserver
import threading

import pytest


class _ConnectProxy(socketserver.ThreadingTCPServer):
    """A minimal HTTP CONNECT proxy on loopback that records the tunnels it opened."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Tunnel)
        self.tunnels: list[str] = []


class _Tunnel(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        request = self.rfile.readline().decode("latin-1").split()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        if len(request) < 2 or request[0] != "CONNECT":
            self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        host, _, port = request[1].rpartition(":")
        self.server.tunnels.append(request[1])
        upstream = socket.create_connection((host, int(port)), timeout=10)
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        pump = threading.Thread(target=_pump, args=(upstream, self.connection), daemon=True)
        pump.start()
        _pump(self.connection, upstream)
        pump.join(timeout=10)
        upstream.close()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(1 << 16):
            target.sendall(chunk)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass


@pytest.fixture
def proxy():
    server = _ConnectProxy()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_https_proxy_variable_is_used(fetcher, release, wheel, proxy):
    outcome = fetcher.run(wheel.file, release.base_url,
                          https_proxy=f"http://127.0.0.1:{proxy.server_address[1]}", no_proxy="")
    assert outcome.returncode == 0, outcome.stderr
    # Both hops (the release path and its redirect target) went through the tunnel.
    assert proxy.tunnels == [f"127.0.0.1:{release.port}"] * 2
    assert len(release.object_gets(wheel.file)) == 1


def test_no_proxy_bypasses_the_proxy(fetcher, release, wheel, proxy):
    outcome = fetcher.run(wheel.file, release.base_url,
                          https_proxy=f"http://127.0.0.1:{proxy.server_address[1]}", no_proxy="127.0.0.1")
    assert outcome.returncode == 0, outcome.stderr
    assert proxy.tunnels == []
