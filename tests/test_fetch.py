"""`philly-analyze fetch` against a real HTTP server on 127.0.0.1 serving generated files:
full download, resume after an interrupted transfer (HTTP Range), a server that ignores
Range, bad checksums, 404, connection refused; and the shipped registry against the
reference copies of the files it names."""

from __future__ import annotations

import hashlib
import json
import random
import re
import socket
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from philly_analyze.fetch import REGISTRY, load_registry
from tests import small_store
from tests.small_store import cli

DATA = random.Random(16).randbytes(300_000)


@dataclass
class State:
    """What the server serves and how it misbehaves."""

    files: dict[str, bytes]
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    sent: int = 0
    #: Body bytes the server sends in all before it goes away (closes every connection
    #: without an answer); None: no limit.
    budget: int | None = None
    #: Cut the next response after this many body bytes (once).
    cut_once: int | None = None
    ignore_range: bool = False


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        st: State = self.server.state  # type: ignore[attr-defined]
        st.requests.append((self.path, self.headers.get("Range")))
        if st.budget is not None and st.budget <= 0:
            self.close_connection = True  # gone: no status line at all
            return
        data = st.files.get(self.path.lstrip("/"))
        if data is None:
            self.send_error(404, "Not Found")
            return
        start, rng = 0, self.headers.get("Range")
        if rng and not st.ignore_range:
            m = re.fullmatch(r"bytes=(\d+)-", rng)
            assert m, rng
            start = int(m.group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        n = len(body)
        if st.cut_once is not None:
            n, st.cut_once = min(n, st.cut_once), None
        if st.budget is not None:
            n = min(n, st.budget)
            st.budget -= n
        st.sent += n  # before the write: the client may be done before this thread goes on
        self.wfile.write(body[:n])

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Server:
    state: State
    port: int

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


@pytest.fixture
def server() -> Iterator[Server]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.state = State({"data.bin": DATA})  # type: ignore[attr-defined]
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield Server(httpd.state, httpd.server_address[1])  # type: ignore[attr-defined]
    finally:
        httpd.shutdown()
        httpd.server_close()


def registry(tmp: Path, files: list[dict], name: str = "demo") -> Path:
    """A registry file of one dataset (the shipped registry's form)."""
    lines = [
        f"[{name}]",
        'title = "test data"',
        'licence = "CC0"',
        'citation = "nobody"',
        'ingest = "philly-analyze ingest {dir}/data.bin"',
    ]
    for f in files:
        lines += [
            f"[[{name}.files]]",
            f'path = "{f["path"]}"',
            "urls = [" + ", ".join(f'"{u}"' for u in f["urls"]) + "]",
            f"size = {f['size']}",
            f'sha256 = "{f["sha256"]}"',
            'verified = "test"',
        ]
    p = tmp / "registry.toml"
    p.write_text("\n".join(lines) + "\n")
    return p


def one_file(tmp: Path, urls: list[str], data: bytes = DATA, path: str = "data.bin") -> Path:
    return registry(
        tmp,
        [
            {
                "path": path,
                "urls": urls,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        ],
    )


def fetch(reg: Path, dest: Path, *more: str) -> object:
    return cli("fetch", "demo", "--registry", reg, "--to", dest, *more)


def test_full_download(server: Server, tmp_path: Path) -> None:
    reg = one_file(tmp_path, [server.url("data.bin")])
    r = fetch(reg, tmp_path / "out")
    assert r.exit_code == 0, r.output
    assert r.stdout == f"{tmp_path / 'out' / 'data.bin'}\n"  # data on stdout: the path
    assert (tmp_path / "out" / "data.bin").read_bytes() == DATA
    assert not (tmp_path / "out" / "data.bin.part").exists()
    assert server.state.requests == [("/data.bin", None)]
    assert "SHA-256 verified (1 downloaded, 0 already present)" in r.stderr
    assert "next: philly-analyze ingest" in r.stderr


def test_a_verified_file_in_place_is_not_downloaded_again(server: Server, tmp_path: Path) -> None:
    reg = one_file(tmp_path, [server.url("data.bin")])
    assert fetch(reg, tmp_path).exit_code == 0
    r = fetch(reg, tmp_path)
    assert r.exit_code == 0, r.output
    assert len(server.state.requests) == 1
    assert "(0 downloaded, 1 already present)" in r.stderr


def test_interrupted_transfer_resumes_with_range_on_the_next_run(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("philly_analyze.fetch.RETRY_WAIT_S", 0.0)  # no pauses between retries
    reg = one_file(tmp_path, [server.url("data.bin")])
    server.state.budget = 100_000  # then the server goes away
    r = fetch(reg, tmp_path)
    assert r.exit_code == 1
    err = r.stderr.strip().splitlines()[-1]
    assert err.startswith(f"error: {tmp_path / 'data.bin'}: cannot download: ")
    assert "run again to resume (100,000 bytes kept in data.bin.part)" in err
    assert not (tmp_path / "data.bin").exists()
    assert (tmp_path / "data.bin.part").read_bytes() == DATA[:100_000]
    # Within the run it tried to resume, and the server was gone each time.
    assert [rng for _, rng in server.state.requests] == [None] + ["bytes=100000-"] * 4

    server.state.budget, server.state.requests, server.state.sent = None, [], 0
    r = fetch(reg, tmp_path)
    assert r.exit_code == 0, r.output
    assert server.state.requests == [("/data.bin", "bytes=100000-")]
    assert server.state.sent == 200_000  # only the rest came over the wire
    assert (tmp_path / "data.bin").read_bytes() == DATA
    assert not (tmp_path / "data.bin.part").exists()


def test_a_transfer_broken_once_is_resumed_in_the_same_run(server: Server, tmp_path: Path) -> None:
    reg = one_file(tmp_path, [server.url("data.bin")])
    server.state.cut_once = 120_000
    r = fetch(reg, tmp_path)
    assert r.exit_code == 0, r.output
    assert [rng for _, rng in server.state.requests] == [None, "bytes=120000-"]
    assert "transfer broke at byte 120,000 of 300,000; resuming" in r.stderr
    assert (tmp_path / "data.bin").read_bytes() == DATA


def test_a_server_that_ignores_range_sends_everything_again(server: Server, tmp_path: Path) -> None:
    reg = one_file(tmp_path, [server.url("data.bin")])
    (tmp_path / "data.bin.part").write_bytes(DATA[:50_000])  # left by an earlier run
    server.state.ignore_range = True
    r = fetch(reg, tmp_path)
    assert r.exit_code == 0, r.output
    assert server.state.requests == [("/data.bin", "bytes=50000-")]
    assert "ignored the range request: downloading from the start" in r.stderr
    assert (tmp_path / "data.bin").read_bytes() == DATA  # not the first 50,000 bytes twice


def test_a_bad_checksum_leaves_no_file(server: Server, tmp_path: Path) -> None:
    other = bytes(reversed(DATA))
    reg = one_file(tmp_path, [server.url("data.bin")], data=other)  # same size, other bytes
    r = fetch(reg, tmp_path)
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1
    assert (
        "checksum mismatch: got 300,000 bytes with SHA-256 " + hashlib.sha256(DATA).hexdigest()
        in r.stderr
    )
    assert "the download was removed and nothing was written under this name" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.toml"]


def test_an_lfs_pointer_instead_of_the_file_is_named(server: Server, tmp_path: Path) -> None:
    pointer = (
        b"version https://git-lfs.github.com/spec/v1\n"
        b"oid sha256:2037ccf63a725a02be718b0e1aeee6142c90b7f62d0d849295120e9f6ba13d2c\n"
        b"size 1055988361\n"
    )
    server.state.files["trace-data.tar.gz"] = pointer
    reg = one_file(tmp_path, [server.url("trace-data.tar.gz")], path="trace-data.tar.gz")
    r = fetch(reg, tmp_path)
    assert r.exit_code == 1
    assert f"got {len(pointer)} bytes, expected 300,000 bytes" in r.stderr
    assert "the server sent a Git LFS pointer instead of the file" in r.stderr
    assert not (tmp_path / "trace-data.tar.gz").exists()


def test_404(server: Server, tmp_path: Path) -> None:
    reg = one_file(tmp_path, [server.url("missing.bin")])
    r = fetch(reg, tmp_path)
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1
    assert f"HTTP 404 Not Found from {server.url('missing.bin')}" in r.stderr
    assert not (tmp_path / "data.bin").exists() and not (tmp_path / "data.bin.part").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_is_one_line(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there any more
    reg = one_file(tmp_path, [f"http://127.0.0.1:{port}/data.bin"])
    r = fetch(reg, tmp_path)
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1
    assert f"cannot download: connection refused by 127.0.0.1:{port}" in r.stderr
    assert "Traceback" not in r.output


def test_next_url_after_a_failing_one_and_url_override(server: Server, tmp_path: Path) -> None:
    reg = one_file(tmp_path, [server.url("gone.bin"), server.url("data.bin")])
    r = fetch(reg, tmp_path / "a")
    assert r.exit_code == 0, r.output
    assert "used " + server.url("data.bin") in r.stderr and "HTTP 404" in r.stderr
    refused = one_file(tmp_path, [f"http://127.0.0.1:{_free_port()}/data.bin"])
    r = fetch(refused, tmp_path / "b", "--url", server.url("data.bin"))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "b" / "data.bin").read_bytes() == DATA


def test_registry_from_the_environment(server: Server, tmp_path: Path) -> None:
    reg = one_file(tmp_path, [server.url("data.bin")])
    r = cli("fetch", "demo", "--to", tmp_path / "o")
    assert r.exit_code == 2 and "unknown dataset demo" in r.output  # the shipped registry
    from click.testing import CliRunner

    from philly_analyze.cli import main

    r = CliRunner(env={"PHILLY_DATASETS": str(reg)}).invoke(
        main, ["fetch", "demo", "--to", str(tmp_path / "o")]
    )
    assert r.exit_code == 0, r.output


def test_an_unexpected_file_in_place_is_left_alone(server: Server, tmp_path: Path) -> None:
    reg = one_file(tmp_path, [server.url("data.bin")])
    (tmp_path / "data.bin").write_bytes(b"mine")
    r = fetch(reg, tmp_path)
    assert r.exit_code == 1
    assert "exists but is not the expected file" in r.stderr
    assert (tmp_path / "data.bin").read_bytes() == b"mine"
    assert server.state.requests == []


def test_registry_paths_stay_inside_the_target(tmp_path: Path) -> None:
    reg = one_file(tmp_path, ["http://127.0.0.1:1/x"], path="../escape.bin")
    r = fetch(reg, tmp_path / "out")
    assert r.exit_code == 1
    assert "must stay inside the target folder" in r.stderr
    assert not (tmp_path / "escape.bin").exists()


def test_fetch_then_ingest_then_report(server: Server, tmp_path: Path) -> None:
    """The quick start's three commands, on a small dataset served locally."""
    src = small_store.write(tmp_path / "made")
    files = []
    for f in sorted(src.iterdir()):
        server.state.files[f.name] = f.read_bytes()
        files.append(
            {
                "path": f"trace/{f.name}",
                "urls": [server.url(f.name)],
                "size": f.stat().st_size,
                "sha256": hashlib.sha256(f.read_bytes()).hexdigest(),
            }
        )
    reg = registry(tmp_path, files)
    r = fetch(reg, tmp_path / "data")
    assert r.exit_code == 0, r.output
    assert len(r.stdout.splitlines()) == 3
    store = tmp_path / "store"
    r = cli("ingest", tmp_path / "data" / "trace", "--store", store, "--quiet")
    assert r.exit_code == 0, r.output
    r = cli("report", "--store", store, "--format", "json", "--section", "status")
    assert r.exit_code == 0, r.output
    status = {row["status"]: row["jobs"] for row in json.loads(r.stdout)["status"]}
    # j1 passed and j2 failed ran to an end; j3 never ran (not counted, as in Table 6).
    assert (status["passed"], status["unsuccessful"], status["total"]) == (1, 1, 2)


# ---------------------------------------------------------------------- the shipped registry
#: Registry path -> the project's reference copy of the same file.
REFERENCE_COPIES = {
    "cluster_machine_list": "philly/cluster_machine_list",
    "pollux_philly_jobs.csv": "philly/pollux_philly_jobs.csv",
    "rfold_philly_arrivals.csv": "philly/rfold_philly_arrivals.csv",
    "gavel/gavel_simulation_throughputs.json": "colocation/gavel_simulation_throughputs.json",
    "gavel_physical_cluster_throughputs.json": "colocation/gavel_physical_cluster_throughputs.json",
}


def test_shipped_registry_matches_the_reference_copies(reference: Path) -> None:
    checked = 0
    for ds in load_registry(REGISTRY).values():
        for f in ds.files:
            rel = REFERENCE_COPIES.get(f.path)
            if rel is None and f.path.startswith("gavel/") and f.path.endswith(".trace"):
                rel = "gavel-msr-traces/" + f.path.split("/", 1)[1]
            if rel is None:
                continue
            data = (reference / rel).read_bytes()
            assert (f.size, f.sha256) == (len(data), hashlib.sha256(data).hexdigest()), f.path
            checked += 1
    assert checked == 20  # every file but the 1 GB archive (its pointer is checked below)


def test_shipped_registry_urls_are_pinned_or_say_why_not() -> None:
    raw = tomllib.loads(REGISTRY.read_text())
    datasets = load_registry(REGISTRY)
    assert set(datasets) == {
        "philly-trace",
        "philly-machine-list",
        "pollux-philly",
        "rfold-philly",
        "gavel",
        "gavel-physical-throughputs",
    }
    trace = datasets["philly-trace"].files[0]
    assert (trace.size, trace.sha256) == (
        1_055_988_361,
        "2037ccf63a725a02be718b0e1aeee6142c90b7f62d0d849295120e9f6ba13d2c",
    )
    assert trace.urls[0].startswith("https://media.githubusercontent.com/media/msr-fiddle/")
    for name, ds in datasets.items():
        assert raw[name]["licence"] and raw[name]["citation"], name
        for f in ds.files:
            assert f.verified, f.path
            hosts = {re.match(r"https://([^/]+)/", u).group(1) for u in f.urls}  # type: ignore[union-attr]
            assert hosts <= {"raw.githubusercontent.com", "media.githubusercontent.com"}, f.urls
            if not f.verified.startswith("no"):  # checked: the first URL names a full commit
                assert re.search(r"/[0-9a-f]{40}/", f.urls[0]), f.urls[0]


def test_list_shows_every_dataset_with_size_licence_and_citation() -> None:
    r = cli("fetch", "--list")
    assert r.exit_code == 0, r.output
    assert "philly-trace  (1.06 GB, 1 file)" in r.stdout
    assert "gavel  (4.13 MB, 16 files)" in r.stdout
    assert "  licence   Apache-2.0 (petuum/adaptdl)" in r.stdout
    assert "Pollux: Co-adaptive Cluster Scheduling" in r.stdout
    assert r.stdout.count("  cite      ") == 6
