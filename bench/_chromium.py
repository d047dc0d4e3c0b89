"""A page checked in a real headless Chromium, driven over the DevTools protocol with the
standard library only (a minimal WebSocket client: no new dependency).

``check_page(path)`` opens a local HTML file in a window of a given width and returns what a
reader would meet: console errors and exceptions (``Runtime`` and ``Log`` events), every
image's natural size, every table's right edge, whether it sits in a box that scrolls, the
hint above it, its headers, its rows' heights and whether its first column stays in place
when the box is scrolled, the page's own width, and a screenshot. Used by ``tests/test_report_browser.py`` and by
``python -m bench._chromium REPORT.html SHOT.png [SELECTOR]`` (how ``docs/report.png`` is
made).

Chromium is started as the tests run it (root in a container, closed network): headless, no
sandbox, no GPU, no QUIC, no first-run/background/component/sync traffic, a fresh profile.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Debian ships ``chromium`` and ``chromium-headless-shell``; other systems name it otherwise.
BINARIES = ("chromium", "chromium-headless-shell", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
)

#: Run in the page after load: images, tables and the page width, as one JSON-able object.
MEASURE_JS = """
(() => {
  const vw = window.innerWidth;
  const scrolls = el => {
    for (let p = el.parentElement; p; p = p.parentElement) {
      const ox = getComputedStyle(p).overflowX;
      if (ox === 'auto' || ox === 'scroll') return p;
    }
    return null;
  };
  const tables = [...document.querySelectorAll('table')].map(t => {
    const box = scrolls(t);
    let title = '', hint = '';
    for (let e = (box || t).previousElementSibling; e; e = e.previousElementSibling) {
      if (/^H[1-4]$/.test(e.tagName)) { title = e.textContent; break; }
      if (e.classList.contains('hint')) hint = e.textContent;
    }
    const visible = (box || t).getBoundingClientRect();
    const rows = [...t.querySelectorAll('tbody tr')].map(r => r.getBoundingClientRect().height);
    // Scrolled to its right end, is the first column still at the box's left edge?
    let pinned = null;
    if (box && box.scrollWidth > box.clientWidth) {
      box.scrollLeft = box.scrollWidth;
      const cells = [...t.querySelectorAll('tr > :first-child')];
      const left = box.getBoundingClientRect().left;
      pinned = cells.every(c => Math.abs(c.getBoundingClientRect().left - left) < 1.5);
      box.scrollLeft = 0;
    }
    return {title, hint, width: t.getBoundingClientRect().width, right: visible.right,
            in_scroll_box: box !== null, box_width: box ? box.clientWidth : null,
            headers: [...t.querySelectorAll('thead th')].map(h => h.textContent),
            row_min: rows.length ? Math.min(...rows) : null,
            row_max: rows.length ? Math.max(...rows) : null, first_column_pinned: pinned};
  });
  const images = [...document.images].map(i => ({
    alt: i.alt, complete: i.complete, natural_width: i.naturalWidth,
    natural_height: i.naturalHeight, shown_width: i.getBoundingClientRect().width}));
  return {viewport_width: vw, page_width: document.documentElement.scrollWidth,
          page_height: document.documentElement.scrollHeight, tables, images};
})()
"""


@dataclass
class PageCheck:
    """What ``check_page`` saw."""

    viewport_width: int
    page_width: int
    page_height: int
    tables: list[dict[str, Any]]
    images: list[dict[str, Any]]
    errors: list[str] = field(default_factory=list)
    screenshot: bytes = b""

    def wide_tables(self) -> list[dict[str, Any]]:
        """Tables (or their scroll boxes) reaching past the window's right edge."""
        return [t for t in self.tables if t["right"] > self.viewport_width + 0.5]

    def scrolling_tables(self) -> list[dict[str, Any]]:
        """Tables wider than the box they scroll in (a reader must scroll sideways)."""
        return [t for t in self.tables if t["in_scroll_box"] and t["width"] > t["box_width"]]

    def broken_images(self) -> list[dict[str, Any]]:
        """Images that did not load (no natural size)."""
        return [i for i in self.images if not i["complete"] or i["natural_width"] <= 0]


def find_browser() -> str | None:
    """Path of a Chromium binary, or None (``PHILLY_CHROMIUM`` names one explicitly)."""
    explicit = os.environ.get("PHILLY_CHROMIUM")
    if explicit:
        return shutil.which(explicit) or (explicit if Path(explicit).exists() else None)
    return next((p for p in map(shutil.which, BINARIES) if p), None)


class _WebSocket:
    """A client WebSocket (RFC 6455) for the DevTools socket: text frames, masked sends."""

    def __init__(self, port: int, path: str, timeout: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise ConnectionError(f"DevTools refused the WebSocket: {status.decode()}")
        self.buf = head.split(b"\r\n\r\n", 1)[1]

    def send(self, text: str) -> None:
        data = text.encode()
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + body)

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self) -> str:
        """The next whole text message (continuation frames joined; pings ignored)."""
        parts: list[bytes] = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)  # the server never masks
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the WebSocket")
            if opcode in (0x1, 0x0):
                parts.append(payload)
                if b0 & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    """A headless Chromium with one page attached over DevTools (a context manager)."""

    def __init__(self, binary: str, timeout: float = 60.0) -> None:
        self.binary, self.timeout = binary, timeout
        self.profile = tempfile.mkdtemp(prefix="philly-chromium-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.ws: _WebSocket | None = None
        self.next_id = 0
        self.session: str | None = None
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        self.proc = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.binary} exited with {self.proc.returncode} at start")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.binary} did not open its DevTools port")
            time.sleep(0.05)
        port, path = port_file.read_text().split()[:2]
        self.ws = _WebSocket(int(port), path, self.timeout)
        target = self.call("Target.createTarget", url="about:blank", session=False)
        self.session = self.call(
            "Target.attachToTarget", targetId=target["targetId"], flatten=True, session=False
        )["sessionId"]
        return self

    def __exit__(self, *exc: object) -> None:
        if self.ws is not None:
            self.ws.close()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, *, session: bool = True, **params: Any) -> dict[str, Any]:
        """Send one command and return its result; events met meanwhile are kept."""
        assert self.ws is not None
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        """The first event called ``method`` (already received or the next ones)."""
        assert self.ws is not None
        for e in self.events:
            if e["method"] == method:
                return e
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            e = json.loads(self.ws.recv())
            if "method" in e:
                self.events.append(e)
                if e["method"] == method:
                    return e
        raise TimeoutError(f"no {method} within {self.timeout} s")


def _errors(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions and browser log errors (failed loads, CSP...)."""
    out = []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", "")) for a in p.get("args", [])))
        elif e["method"] == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: " + str(d.get("exception", {}).get("description", d)))
        elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            out.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
    return out


def check_page(
    path: Path,
    width: int = 1400,
    height: int = 900,
    binary: str | None = None,
    shot_of: str | None = None,
) -> PageCheck:
    """Open ``path`` in a ``width`` x ``height`` window and measure it (see the module doc);
    the screenshot is of the first screen, or of the element matching the CSS selector
    ``shot_of`` (at most ``height`` px of it)."""
    binary = binary or find_browser()
    if binary is None:
        raise FileNotFoundError(f"no Chromium found (tried {', '.join(BINARIES)})")
    with Browser(binary) as b:
        for domain in ("Page", "Runtime", "Log"):
            b.call(f"{domain}.enable")
        b.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        b.call("Page.navigate", url=Path(path).resolve().as_uri())
        b.wait_event("Page.loadEventFired")
        found = b.call("Runtime.evaluate", expression=MEASURE_JS, returnByValue=True)
        if "exceptionDetails" in found:
            raise RuntimeError(f"measuring the page failed: {found['exceptionDetails']}")
        clip: dict[str, Any] = {}
        if shot_of is not None:
            rect = b.call(
                "Runtime.evaluate",
                expression=f"(() => {{const r = document.querySelector({json.dumps(shot_of)})"
                ".getBoundingClientRect(); return {x: r.left + scrollX, y: r.top + scrollY, "
                "width: r.width, height: r.height};})()",
                returnByValue=True,
            )["result"]["value"]
            rect["height"] = min(rect["height"], height)
            clip = {"clip": {**rect, "scale": 1}, "captureBeyondViewport": True}
        shot = b.call("Page.captureScreenshot", format="png", **clip)
        # Anything logged while the page loaded has arrived by now (events come in order).
        return PageCheck(
            **found["result"]["value"],
            errors=_errors(b.events),
            screenshot=base64.b64decode(shot["data"]),
        )


def main(argv: list[str]) -> int:
    """``python -m bench._chromium REPORT.html SHOT.png``: check a page and save its first
    screen (how docs/report.png is made)."""
    if len(argv) not in (2, 3):
        print(
            "usage: python -m bench._chromium REPORT.html SHOT.png [CSS-SELECTOR]", file=sys.stderr
        )
        return 2
    page = check_page(Path(argv[0]), shot_of=argv[2] if len(argv) == 3 else None)
    Path(argv[1]).write_bytes(page.screenshot)
    print(
        f"{argv[0]}: {len(page.images)} images ({len(page.broken_images())} broken), "
        f"{len(page.tables)} tables ({len(page.wide_tables())} past {page.viewport_width} px, "
        f"{sum(t['in_scroll_box'] for t in page.tables)} in a scroll box), "
        f"page {page.page_width} x {page.page_height} px, {len(page.errors)} errors"
    )
    for e in page.errors:
        print("  " + e)
    for t in page.wide_tables():
        print(f"  too wide: {t['title']!r} right edge {t['right']:.0f} px")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
