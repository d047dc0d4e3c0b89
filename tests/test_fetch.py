"""`philly-analyze fetch` against a real HTTP server on 127.0.0.1 serving generated files:
full download, resume after an interrupted transfer (HTTP Range), a server that ignores
Range, bad checksums, 404, connection refused, no network (a name that does not resolve),
progress on a terminal; and the shipped registry against the
reference copies of the files it names."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pty
import random
import re
import shlex
import socket
import subprocess
import sys
import tarfile
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import Result

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
    #: Send the body in this many pieces, pausing between them (a slow link), seconds.
    pause_s: float = 0.0


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        # The fixture hangs the test's State on the server object (untyped there).
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
        pieces = 10 if st.pause_s else 1
        step = -(-n // pieces) if n else 0
        st.sent += n  # counted before the client can have it all (the tests read it then)
        for i in range(0, n, step or 1):
            self.wfile.write(body[i : min(i + step, n)])
            if st.pause_s:
                self.wfile.flush()
                time.sleep(st.pause_s)

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
    httpd.state = State({"data.bin": DATA})  # type: ignore[attr-defined]  # read by Handler
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield Server(httpd.state, httpd.server_address[1])  # type: ignore[attr-defined]  # as above
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
            f'verified = "{f.get("verified", "test")}"',
        ]
        if f.get("checked", "file"):
            lines.append(f'checked = "{f.get("checked", "file")}"')
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


def fetch(reg: Path, dest: Path, *more: str) -> Result:
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
    # What to do: the registry's SHA-256 to check a copy against, and where to put it.
    assert (
        "What to do: run again if the transfer may have been garbled; else get the file from "
        "elsewhere (a mirror: --url URL for a one-file dataset, or by hand), check that its "
        f"SHA-256 is {hashlib.sha256(other).hexdigest()} (`sha256sum FILE`), and put it at "
        f"{tmp_path / 'data.bin'}\n"
    ) in r.stderr
    assert "never verified" not in r.stderr  # this file's URL was checked (checked = "file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.toml"]


def test_wrong_bytes_from_one_url_then_the_next_url(server: Server, tmp_path: Path) -> None:
    """A URL serving other bytes (a changed file upstream) is not the end: the next URL is
    tried, and the note says which was used and why the first was not."""
    server.state.files["changed.bin"] = bytes(reversed(DATA))
    reg = one_file(tmp_path, [server.url("changed.bin"), server.url("data.bin")])
    r = fetch(reg, tmp_path / "out")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "out" / "data.bin").read_bytes() == DATA
    assert f"used {server.url('data.bin')}" in r.stderr
    assert f"with SHA-256 {hashlib.sha256(bytes(reversed(DATA))).hexdigest()}" in r.stderr


def test_an_unverified_url_says_so_before_and_on_a_mismatch(server: Server, tmp_path: Path) -> None:
    """A file whose URL nobody verified (no `checked`): fetching it says so first, and a
    checksum mismatch names the registry's reason and asks for a report."""
    other = bytes(reversed(DATA))
    reg = registry(
        tmp_path,
        [{"path": "data.bin", "urls": [server.url("data.bin")], "size": len(other),
          "sha256": hashlib.sha256(other).hexdigest(), "checked": "",
          "verified": "no: commit assumed"}],
    )  # fmt: skip
    r = fetch(reg, tmp_path / "out")
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert lines[0] == (
        "note: demo: 1 of 1 files have URLs nobody has verified (see `fetch --list`); their "
        "SHA-256 is checked all the same"
    )
    assert lines[1].startswith(f"error: {tmp_path / 'out' / 'data.bin'}: checksum mismatch: ")
    assert lines[1].endswith(
        "This file's URL was never verified (the registry says: no: commit assumed): upstream "
        "may hold another version than the one the project names; please report it"
    )
    assert len(lines) == 2


def test_registry_checked_values(tmp_path: Path) -> None:
    reg = registry(
        tmp_path,
        [{"path": "x", "urls": ["http://h/x"], "size": 1, "sha256": "0" * 64,
          "checked": "maybe"}],
    )  # fmt: skip
    r = cli("fetch", "--list", "--registry", reg)
    assert r.exit_code == 1
    assert "x: checked must be one of 'file', 'pointer', ''" in r.stderr


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


def test_offline_is_one_line_that_says_so(tmp_path: Path) -> None:
    """A host name that cannot be resolved, as every name is with no network (``.invalid``
    never resolves, RFC 2606): one line, naming the host and asking whether we are offline."""
    url = "http://philly-analyze-fetch-test.invalid/data.bin"
    reg = one_file(tmp_path, [url])
    r = fetch(reg, tmp_path)
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.output
    assert (
        "cannot download: cannot resolve philly-analyze-fetch-test.invalid: are you offline?"
        in r.stderr
    )
    assert f"; run again, or download {url} yourself and put it there" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.toml"]


def _fetch_on_a_terminal(args: list[str]) -> tuple[int, str, str]:
    """``philly-analyze fetch ARGS`` in a fresh process whose stderr is a pseudo-terminal:
    exit code, stdout, and everything the terminal received."""
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read)
    reader.start()
    cmd = [sys.executable, "-c", "from philly_analyze.cli import main; main()", "fetch", *args]
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    out, _ = p.communicate(timeout=120)
    reader.join(timeout=30)
    os.close(master)
    return p.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


def test_progress_bar_on_a_terminal_only(server: Server, tmp_path: Path) -> None:
    """A download that takes a second shows a bar with the bytes so far on a terminal's
    stderr; stdout holds the path alone; piped stderr (CliRunner above) or --quiet shows none."""
    server.state.pause_s = 0.12  # 10 pieces: about 1.2 s, several refreshes of the bar
    reg = one_file(tmp_path, [server.url("data.bin")])
    code, out, err = _fetch_on_a_terminal(
        ["demo", "--registry", str(reg), "--to", str(tmp_path / "a")]
    )
    assert code == 0, err
    assert out == f"{tmp_path / 'a' / 'data.bin'}\n"
    assert "fetching data.bin" in err and "/300.0 kB" in err, err
    assert "SHA-256 verified (1 downloaded, 0 already present)" in err
    code, out, err = _fetch_on_a_terminal(
        ["demo", "--registry", str(reg), "--to", str(tmp_path / "b"), "--quiet"]
    )
    assert code == 0 and err == "" and out == f"{tmp_path / 'b' / 'data.bin'}\n"


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
    # small_store's one deliberate reject accepted (without it: exit 1 naming it).
    r = cli("ingest", tmp_path / "data" / "trace", "--store", store, "--quiet",
            *small_store.ACCEPT_REJECT)  # fmt: skip
    assert r.exit_code == 0, r.output
    r = cli("report", "--store", store, "--format", "json", "--section", "status")
    assert r.exit_code == 0, r.output
    status = {row["status"]: row["jobs"] for row in json.loads(r.stdout)["status"]}
    # j1 passed and j2 failed ran to an end; j3 never ran (not counted, as in Table 6).
    assert (status["passed"], status["unsuccessful"], status["total"]) == (1, 1, 2)


def test_fetch_an_archive_then_ingest_then_report_as_the_quick_start_does(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's quick start on a small `trace-data.tar.gz` (the published trace's
    layout: `trace-data/<file>`) served locally: `fetch`, then the `next:` command it prints
    (the registry's ingest hint), then `report ... --format html`, in one folder."""
    src = small_store.write(tmp_path / "made")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for f in sorted(src.iterdir()):
            tar.add(f, arcname=f"trace-data/{f.name}")
    archive = buf.getvalue()
    server.state.files["trace-data.tar.gz"] = archive
    reg = registry(
        tmp_path,
        [{"path": "trace-data.tar.gz", "urls": [server.url("trace-data.tar.gz")],
          "size": len(archive), "sha256": hashlib.sha256(archive).hexdigest()}],
    )  # fmt: skip
    text = reg.read_text().replace(
        "ingest {dir}/data.bin", "ingest {dir}/trace-data.tar.gz --store philly-store"
    )
    reg.write_text(text)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    r = cli("fetch", "demo", "--registry", reg)
    assert r.exit_code == 0, r.output
    assert r.stdout == "trace-data.tar.gz\n"
    nxt = next(ln for ln in r.stderr.splitlines() if ln.startswith("next: "))
    assert nxt == "next: philly-analyze ingest ./trace-data.tar.gz --store philly-store"
    # small_store's one deliberate reject accepted (without it: exit 1 naming it).
    r = cli(*shlex.split(nxt.removeprefix("next: philly-analyze ")), "--quiet",
            *small_store.ACCEPT_REJECT)  # fmt: skip
    assert r.exit_code == 0, r.output
    r = cli("report", "--store", "philly-store", "--format", "html", "-o", "report.html",
            "--figures", "figures/", "-q")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (work / "figures" / "table6_status.png").exists()
    r = cli("report", "--store", "philly-store", "--format", "json", "--section", "status")
    status = {row["status"]: row["jobs"] for row in json.loads(r.stdout)["status"]}
    # As from the loose files (small_store.write): j1 passed, j2 failed, j3 never ran.
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
            # A URL that does not match fails the test here, with its AttributeError.
            hosts = {re.match(r"https://([^/]+)/", u).group(1) for u in f.urls}  # type: ignore[union-attr]
            assert hosts <= {"raw.githubusercontent.com", "media.githubusercontent.com"}, f.urls
            # Checked: the first URL names a full commit; else the reason is given.
            assert bool(f.checked) == f.verified.startswith("index:"), f.path
            if f.checked:
                assert re.search(r"/[0-9a-f]{40}/", f.urls[0]), f.urls[0]
    assert trace.checked == "pointer"  # its bytes (1 GB) were never seen
    unchecked = {f.path for ds in datasets.values() for f in ds.files if not f.checked}
    assert unchecked == {
        "rfold_philly_arrivals.csv",
        "gavel/gavel_simulation_throughputs.json",
        "gavel/23dbec.trace",
        "gavel/6214e9.trace",
        "gavel/b436b2.trace",
        "gavel/e13805.trace",
        "gavel_physical_cluster_throughputs.json",
    }


def test_list_says_what_was_checked() -> None:
    """Not "checked 1 of 1" for an archive of which only the LFS pointer was seen; the
    files whose URLs nobody verified are named, each with the registry's reason."""
    out = cli("fetch", "--list").stdout
    blocks = {b.split("  (")[0]: b for b in out.split("\n\n")}
    assert (
        "  checked   1 of 1: only the Git LFS pointer (it names the size and SHA-256) at the "
        "pinned commit; the file itself was never downloaded to check"
    ) in blocks["philly-trace"]
    gavel = blocks["gavel"]
    assert (
        "  checked   11 of 16 files: URL and bytes compared with a copy of the upstream "
        "repository; 5 of 16: NOT CHECKED (URLs never verified, below)"
    ) in gavel
    named = re.findall(r"^  unchecked (\S+) \(no: ", gavel, re.M)
    assert named == ["gavel/gavel_simulation_throughputs.json", "gavel/23dbec.trace",
                     "gavel/6214e9.trace", "gavel/b436b2.trace", "gavel/e13805.trace"]  # fmt: skip
    assert "  checked   1 of 1 file: URL and bytes compared" in blocks["philly-machine-list"]
    assert "unchecked" not in blocks["philly-machine-list"]
    assert out.rstrip().endswith("a file with other bytes is refused.")


def test_list_shows_every_dataset_with_size_licence_and_citation() -> None:
    r = cli("fetch", "--list")
    assert r.exit_code == 0, r.output
    assert "philly-trace  (1.06 GB, 1 file)" in r.stdout
    assert "gavel  (4.13 MB, 16 files)" in r.stdout
    assert "  licence   Apache-2.0 (petuum/adaptdl)" in r.stdout
    assert "Pollux: Co-adaptive Cluster Scheduling" in r.stdout
    assert r.stdout.count("  cite      ") == 6
