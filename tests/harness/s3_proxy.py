"""An S3-shaped stand-in: a proxy in front of a moto server that adds the S3 limits moto lacks.

moto enforces neither of the two limits that decide how large models move, so without them a single-stream download
or a single-PUT upload of a 26 GB engine would look fine in every test. The proxy adds them:

- **per-connection throughput cap** (`bytes_per_s`): every client connection is paced to at most this many bytes
  per second, in both directions (S3 serves roughly 85-90 MB/s per connection; parallelism across connections is
  what reaches an instance's bandwidth);
- **single-PUT limit** (`single_put_limit`): a PutObject (or an UploadPart: S3's part maximum is the same 5 GB)
  whose body is larger is refused with S3's ``EntityTooLarge`` error (400), before its body is read.

S3 behaviours moto lacks that the transfers rely on, added too:

- the ``x-amz-checksum-sha256`` of a PutObject or an UploadPart (up to `VERIFY_MAX_BYTES`) is checked against the
  body; a mismatch is refused with ``BadDigest`` (400) and nothing is stored;
- ListParts answers each part's ``ChecksumSHA256`` (the one verified when it was uploaded through the proxy), as S3
  does for an upload created with a checksum algorithm.

Ranged GETs are served from a cache file per object version (bucket, key, ETag) that the proxy fills with one GET from
moto: moto reads a whole object into memory on every ranged GET, which would turn a parallel download of a GB-sized
object into a measurement of moto. Each ranged GET first asks moto for the object's metadata (HEAD, with the request's
conditional headers such as If-Match), so a replaced object is fetched again and a failed precondition is moto's own
answer. Every other request (any service: moto serves them all on one port) passes through unchanged, paced.

    with S3Proxy(moto.endpoint, tmp_path, bytes_per_s=4 * MIB, single_put_limit=5 * MIB) as proxy:
        client = boto3.client("s3", endpoint_url=proxy.endpoint, ...)
        print(proxy.describe())   # the limits, stated
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import os
import re
import shutil
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .moto import MotoServer
from .ports import free_port

MIB = 1024 * 1024
# The limits the tests use: S3's 5 GB single PUT and ~90 MB/s per connection, scaled down so that a file of a few MiB
# already needs a multipart upload, and a single stream is visibly slower than parallel ranged GETs.
TEST_SINGLE_PUT_LIMIT = 5 * MIB
TEST_BYTES_PER_S = 8 * MIB
CHUNK = 256 * 1024
# Bodies up to this size are buffered to check their x-amz-checksum-sha256 before they reach moto.
VERIFY_MAX_BYTES = 64 * MIB
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "expect"}
_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


def _s3_error(code: str, message: str, **fields: Any) -> bytes:
    extra = "".join(f"<{k}>{v}</{k}>" for k, v in fields.items())
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>{extra}'
        f"<RequestId>s3-proxy</RequestId><HostId>s3-proxy</HostId></Error>"
    ).encode()


class Pacer:
    """Holds one direction of one request to `rate` bytes per second (None: no cap)."""

    def __init__(self, rate: int | None) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.moved = 0

    def __call__(self, n: int) -> None:
        self.moved += n
        if self.rate:
            ahead = self.start + self.moved / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)


class S3Proxy:
    """The proxy: `endpoint` is its URL; `stats` counts what it refused and served."""

    def __init__(
        self, upstream: str, workdir: Path, bytes_per_s: int | None = None, single_put_limit: int | None = None, port: int | None = None
    ) -> None:
        parsed = urlsplit(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.bytes_per_s = bytes_per_s
        self.single_put_limit = single_put_limit
        self.cache_dir = Path(workdir) / f"s3-proxy-cache-{os.getpid()}-{id(self)}"
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.stats = {"connections": 0, "entity_too_large": 0, "bad_digest": 0, "ranged_gets": 0, "bytes_out": 0}
        self.part_checksums: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()
        self._fill_locks: dict[str, threading.Lock] = {}
        self._server: ThreadingHTTPServer | None = None

    def describe(self) -> str:
        cap = f"{self.bytes_per_s / MIB:g} MiB/s per connection" if self.bytes_per_s else "no per-connection cap"
        limit = f"single PUT limit {self.single_put_limit / MIB:g} MiB" if self.single_put_limit else "no single-PUT limit"
        return (
            f"S3-shaped proxy {self.endpoint} in front of moto {self.upstream[0]}:{self.upstream[1]}: {cap}, {limit} (EntityTooLarge above)"
        )

    def start(self) -> S3Proxy:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="s3-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    def __enter__(self) -> S3Proxy:
        return self.start()

    def __exit__(self, *_exc: Any) -> None:
        self.stop()

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.stats[name] += n

    def fill_lock(self, name: str) -> threading.Lock:
        with self._lock:
            return self._fill_locks.setdefault(name, threading.Lock())


class ProxiedMoto(MotoServer):
    """A moto server seen through an S3Proxy: `endpoint`, `client()` and `env()` reach the proxy; `request_count()`
    is still moto's (what reached AWS's stand-in)."""

    def __init__(self, moto: MotoServer, proxy: S3Proxy | ProxyProcess) -> None:
        super().__init__(moto.log_path.parent, port=proxy.port)
        self.log_path = moto.log_path
        self.moto = moto
        self.proxy = proxy

    def start(self, detach: bool = False) -> ProxiedMoto:
        raise RuntimeError("start the moto server and the proxy, then wrap them")

    def stop(self) -> None:
        self.proxy.stop()


def _handler(proxy: S3Proxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        upstream_conn: http.client.HTTPConnection | None = None

        def log_message(self, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            proxy.count("connections")

        def finish(self) -> None:
            super().finish()
            if self.upstream_conn:
                self.upstream_conn.close()

        # -- what the request is

        def _parts(self) -> tuple[str, str, dict[str, list[str]]]:
            """(bucket, key, query) of a path-style S3 request ('' when absent)."""
            split = urlsplit(self.path)
            bucket, _sep, key = unquote(split.path).lstrip("/").partition("/")
            return bucket, key, parse_qs(split.query, keep_blank_values=True)

        def _declared_size(self) -> int | None:
            for header in ("x-amz-decoded-content-length", "Content-Length"):
                if self.headers.get(header, "").isdigit():
                    return int(self.headers[header])
            return None

        def _is_object_put(self) -> bool:
            _bucket, key, query = self._parts()
            if self.command != "PUT" or not key or self.headers.get("x-amz-copy-source"):
                return False
            return not query or ("partNumber" in query and "uploadId" in query)

        # -- S3's answers

        def _reply(self, status: int, body: bytes, close: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _too_large(self) -> bool:
            """Refuses a PutObject/UploadPart above the single-PUT limit (before its body is read)."""
            size = self._declared_size()
            if proxy.single_put_limit is None or not self._is_object_put() or size is None or size <= proxy.single_put_limit:
                return False
            proxy.count("entity_too_large")
            body = _s3_error(
                "EntityTooLarge",
                "Your proposed upload exceeds the maximum allowed size",
                ProposedSize=size,
                MaxSizeAllowed=proxy.single_put_limit,
            )
            self._reply(400, body, close=True)  # the body was never read: the connection cannot carry another request
            return True

        def handle_expect_100(self) -> bool:
            if self._too_large():
                return False
            return super().handle_expect_100()

        # -- bodies

        def _request_chunks(self):
            pace = Pacer(proxy.bytes_per_s)
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return
                    data = self.rfile.read(size)
                    self.rfile.readline()
                    pace(len(data))
                    yield data
            remaining = int(self.headers.get("Content-Length") or 0)
            while remaining:
                data = self.rfile.read(min(CHUNK, remaining))
                if not data:
                    raise ConnectionError("client closed the connection mid-body")
                remaining -= len(data)
                pace(len(data))
                yield data

        def _upstream(self) -> http.client.HTTPConnection:
            if self.upstream_conn is None:
                self.upstream_conn = http.client.HTTPConnection(*proxy.upstream, timeout=600)
            return self.upstream_conn

        def _send_upstream(self, method: str, headers: list[tuple[str, str]], body: Any, chunked: bool) -> http.client.HTTPResponse:
            for attempt in (1, 2):  # a kept-alive upstream connection moto closed: once more on a new one
                conn = self._upstream()
                try:
                    conn.putrequest(method, self.path, skip_host=True, skip_accept_encoding=True)
                    for name, value in headers:
                        conn.putheader(name, value)
                    if chunked:
                        conn.putheader("Transfer-Encoding", "chunked")
                    conn.endheaders()
                    if isinstance(body, bytes):
                        conn.send(body)
                    elif body is not None:
                        for data in body:
                            conn.send(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                        if chunked:
                            conn.send(b"0\r\n\r\n")
                    return conn.getresponse()
                except (ConnectionError, http.client.HTTPException):
                    conn.close()
                    self.upstream_conn = None
                    if attempt == 2 or not isinstance(body, (bytes, type(None))):
                        raise
            raise AssertionError("unreachable")

        def _forward_headers(self, drop: tuple[str, ...] = ()) -> list[tuple[str, str]]:
            return [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP and k.lower() not in drop]

        def _relay(self, resp: http.client.HTTPResponse, rewrite: Any = None) -> None:
            """Upstream's answer to the client, its body paced."""
            body_expected = self.command != "HEAD" and resp.status not in (204, 304) and resp.status >= 200
            headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP_BY_HOP]
            if rewrite is not None:
                data = rewrite(resp.read())
                headers = [(k, v) for k, v in headers if k.lower() != "content-length"] + [("Content-Length", str(len(data)))]
                chunks: Any = [data]
            else:
                chunks = iter(lambda: resp.read(CHUNK), b"") if body_expected else []
            has_length = any(k.lower() == "content-length" for k, _value in headers)
            self.send_response_only(resp.status, resp.reason)
            for name, value in headers:
                self.send_header(name, value)
            chunked = body_expected and not has_length
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            if resp.will_close:
                self.upstream_conn = None
            self.end_headers()
            pace = Pacer(proxy.bytes_per_s)
            for data in chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                proxy.count("bytes_out", len(data))
                pace(len(data))
            if chunked:
                self.wfile.write(b"0\r\n\r\n")

        # -- verbs

        def _handle(self) -> None:
            if self._too_large():
                return
            bucket, key, query = self._parts()
            if self.command == "GET" and key and self.headers.get("Range") and not query and self._ranged_get(bucket, key):
                return
            chunked_in = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
            body: Any = None
            if chunked_in or int(self.headers.get("Content-Length") or 0):
                body = self._request_chunks()
            declared = self.headers.get("x-amz-checksum-sha256")
            size = self._declared_size()
            plain = "aws-chunked" not in self.headers.get("Content-Encoding", "")
            if self._is_object_put() and declared and plain and size is not None and size <= VERIFY_MAX_BYTES:
                body = b"".join(body or [])
                if base64.b64encode(hashlib.sha256(body).digest()).decode() != declared:
                    proxy.count("bad_digest")
                    message = "The Content-MD5 or checksum value you specified did not match what we received."
                    self._reply(400, _s3_error("BadDigest", message))
                    return
            headers = self._forward_headers()
            if isinstance(body, bytes):  # buffered to be checked: sent with its length, whatever framing it came in
                headers = [(k, v) for k, v in headers if k.lower() != "content-length"] + [("Content-Length", str(len(body)))]
            resp = self._send_upstream(self.command, headers, body, chunked=chunked_in and not isinstance(body, bytes))
            if self.command == "PUT" and "partNumber" in query and resp.status == 200 and declared:
                with proxy._lock:
                    proxy.part_checksums[(query["uploadId"][0], int(query["partNumber"][0]))] = declared
            rewrite = None
            if self.command == "GET" and key and "uploadId" in query and resp.status == 200:
                rewrite = self._with_part_checksums(query["uploadId"][0])
            self._relay(resp, rewrite)

        def _with_part_checksums(self, upload_id: str) -> Any:
            """ListParts as S3 answers it: each part with the ChecksumSHA256 verified on upload."""

            def add(xml: bytes) -> bytes:
                def part(match: re.Match) -> bytes:
                    text = match.group(0)
                    number = re.search(rb"<PartNumber>(\d+)</PartNumber>", text)
                    checksum = number and proxy.part_checksums.get((upload_id, int(number.group(1))))
                    if not checksum or b"<ChecksumSHA256>" in text:
                        return text
                    return text.replace(b"</Part>", b"<ChecksumSHA256>" + checksum.encode() + b"</ChecksumSHA256></Part>")

                return re.sub(rb"<Part>.*?</Part>", part, xml, flags=re.S)

            return add

        def _ranged_get(self, bucket: str, key: str) -> bool:
            """Serves a single-range GET from the cached object version; False to let moto answer it instead."""
            match = _RANGE.match(self.headers.get("Range", "").replace(" ", ""))
            if not match:
                return False
            head = self._send_upstream("HEAD", self._forward_headers(drop=("range",)), None, chunked=False)
            head.read()
            if head.will_close:
                self.upstream_conn = None
            if head.status != 200:
                return False  # moto answers (404, 412 PreconditionFailed, ...) the GET itself
            size = int(head.getheader("Content-Length") or 0)
            etag = head.getheader("ETag") or ""
            start = int(match.group(1))
            end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
            if start > end:
                return False
            cached = proxy.cache_dir / hashlib.sha256(f"{bucket}/{key}/{etag}".encode()).hexdigest()
            with proxy.fill_lock(cached.name):
                if not cached.exists() and not self._fill(cached, etag):
                    return False
            proxy.count("ranged_gets")
            self.send_response_only(206, "Partial Content")
            for name, value in head.getheaders():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length" and not name.lower().startswith("x-amz-checksum"):
                    self.send_header(name, value)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.send_header("Content-Length", str(end - start + 1))
            self.end_headers()
            pace = Pacer(proxy.bytes_per_s)
            with open(cached, "rb") as f:
                offset, remaining = start, end - start + 1
                while remaining:
                    sent = os.sendfile(self.connection.fileno(), f.fileno(), offset, min(CHUNK, remaining))
                    if not sent:
                        raise ConnectionError("client went away")
                    offset, remaining = offset + sent, remaining - sent
                    proxy.count("bytes_out", sent)
                    pace(sent)
            return True

        def _fill(self, cached: Path, etag: str) -> bool:
            """One GET of the whole object from moto into the cache (False when it changed meanwhile)."""
            resp = self._send_upstream("GET", self._forward_headers(drop=("range", "if-match", "if-none-match")), None, chunked=False)
            partial = cached.with_suffix(".partial")
            try:
                if resp.status != 200 or (resp.getheader("ETag") or "") != etag:
                    resp.read()
                    return False
                with open(partial, "wb") as out:
                    for data in iter(lambda: resp.read(MIB), b""):
                        out.write(data)
                partial.rename(cached)
                return True
            finally:
                if resp.will_close:
                    self.upstream_conn = None
                partial.unlink(missing_ok=True)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _handle

    return Handler


class ProxyProcess:
    """The proxy in a process of its own (its own interpreter lock: a benchmark's client threads do not slow it down).

    Same `endpoint`, `describe()` and `stop()` as S3Proxy; use it as a context manager."""

    def __init__(self, upstream: str, workdir: Path, bytes_per_s: int | None = None, single_put_limit: int | None = None) -> None:
        import subprocess
        import sys

        from .triton import REPO_ROOT

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        command = [
            sys.executable,
            "-m",
            "tests.harness.s3_proxy",
            "--upstream",
            upstream,
            "--port",
            str(self.port),
            "--workdir",
            str(workdir),
        ]
        if bytes_per_s:
            command += ["--mib-per-s", str(bytes_per_s / MIB)]
        if single_put_limit:
            command += ["--put-limit-mib", str(single_put_limit / MIB)]
        self._proc = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
        self._description = (self._proc.stdout.readline() if self._proc.stdout else "").strip()
        if not self._description:
            self._proc.kill()
            raise RuntimeError(f"the S3-shaped proxy did not start (exit {self._proc.wait()})")

    def describe(self) -> str:
        return self._description

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(10)

    def __enter__(self) -> ProxyProcess:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Serves a proxy in the foreground: python -m tests.harness.s3_proxy --upstream URL [--mib-per-s N] [--put-limit-mib N]."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.harness.s3_proxy")
    parser.add_argument("--upstream", required=True, help="the moto server's URL")
    parser.add_argument("--port", type=int)
    parser.add_argument("--mib-per-s", type=float, help="per-connection throughput cap, MiB/s")
    parser.add_argument("--put-limit-mib", type=float, help="largest single PutObject/UploadPart, MiB")
    parser.add_argument("--workdir", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    proxy = S3Proxy(
        args.upstream,
        args.workdir,
        bytes_per_s=int(args.mib_per_s * MIB) if args.mib_per_s else None,
        single_put_limit=int(args.put_limit_mib * MIB) if args.put_limit_mib else None,
        port=args.port,
    ).start()
    print(proxy.describe(), flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
