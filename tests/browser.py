"""A small driver for Debian's headless Chromium over the DevTools protocol (aiohttp websocket).

    with Chromium.start() as browser:                       # one browser process, several pages
        page = browser.load(url, ready="window.__np_ready === true", evals={"n": "document.title"})
        page.console_errors, page.requests, page.values["n"], page.screenshot   # PNG bytes
        browser.png_stats(page.screenshot)                   # {"width", "height", "colours", "non_white"}

Used by the HTML report tests: console errors, exceptions, CSP violations, network requests and
JavaScript dialogs are all collected, so a page that misbehaves shows it.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
]


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


class CDPError(RuntimeError):
    pass


@dataclass
class PageResult:
    url: str
    console_errors: list[str] = field(default_factory=list)
    """console.error/assert calls, uncaught exceptions and browser log errors (CSP, failed loads)."""
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: bytes = b""
    pdf: bytes = b""
    load_s: float = 0.0
    """Seconds from navigation until the ready expression held."""


class _Session:
    """One websocket to the browser; commands by id, events to listeners (flattened target sessions)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.listeners: list[Any] = []
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                fut = self.pending.pop(data["id"], None)
                if fut is not None and not fut.done():
                    if "error" in data:
                        fut.set_exception(CDPError(str(data["error"])))
                    else:
                        fut.set_result(data.get("result", {}))
            else:
                for cb in list(self.listeners):
                    cb(data)

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 60,
    ) -> Any:
        i = next(self.ids)
        msg: dict[str, Any] = {"id": i, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[i] = fut
        await self.ws.send_str(json.dumps(msg))
        return await asyncio.wait_for(fut, timeout)


def _console_text(p: dict[str, Any]) -> str:
    return " ".join(str(a.get("value", a.get("description", a.get("type")))) for a in p.get("args", []))


class Chromium:
    """A headless Chromium process with its DevTools endpoint."""

    def __init__(self, proc: subprocess.Popen[bytes], ws_url: str, profile: str) -> None:
        self.proc = proc
        self.ws_url = ws_url
        self.profile = profile

    @classmethod
    def start(cls, binary: str | None = None, timeout: float = 60) -> Chromium:
        binary = binary or find_chromium()
        if binary is None:
            raise FileNotFoundError("chromium not found")
        profile = tempfile.mkdtemp(prefix="np-chromium-")
        proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert proc.stderr is not None
        deadline = time.monotonic() + timeout
        seen = []
        os.set_blocking(proc.stderr.fileno(), True)
        while time.monotonic() < deadline:
            line = proc.stderr.readline().decode(errors="replace")
            if not line:
                if proc.poll() is not None:
                    break
                continue
            seen.append(line)
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                # keep draining stderr so chromium never blocks on a full pipe
                import threading

                threading.Thread(
                    target=lambda: proc.stderr.read() if proc.stderr else None, daemon=True
                ).start()
                return cls(proc, m.group(1), profile)
        proc.kill()
        proc.wait(10)
        shutil.rmtree(profile, ignore_errors=True)
        raise RuntimeError("chromium did not start:\n" + "".join(seen[-20:]))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- pages -------------------------------------------------------------------------------------
    def load(
        self,
        url: str,
        ready: str = "document.readyState === 'complete'",
        evals: dict[str, str] | None = None,
        timeout: float = 90,
        width: int = 1280,
        height: int = 900,
        full_page: bool = True,
        pdf: bool = False,
    ) -> PageResult:
        """Open `url` in a fresh tab, wait for `ready`, evaluate `evals`, take a screenshot (and a PDF)."""
        return asyncio.run(self._load(url, ready, evals or {}, timeout, width, height, full_page, pdf))

    def png_stats(self, png: bytes, timeout: float = 60) -> dict[str, Any]:
        """Decode a PNG with the browser's own decoder: size, distinct colours, share of non-white pixels."""
        return asyncio.run(self._png_stats(png, timeout))

    async def _connect(self) -> tuple[Any, Any, _Session]:
        import aiohttp

        http = aiohttp.ClientSession()
        ws = await http.ws_connect(self.ws_url, max_msg_size=0, timeout=aiohttp.ClientWSTimeout(ws_close=5))
        return http, ws, _Session(ws)

    async def _new_tab(self, cdp: _Session) -> tuple[str, str]:
        target = (await cdp.call("Target.createTarget", {"url": "about:blank"}))["targetId"]
        sid = (await cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        return target, sid

    async def _load(
        self,
        url: str,
        ready: str,
        evals: dict[str, str],
        timeout: float,
        width: int,
        height: int,
        full_page: bool,
        pdf: bool,
    ) -> PageResult:
        http, ws, cdp = await self._connect()
        res = PageResult(url=url)
        try:
            target, sid = await self._new_tab(cdp)

            def on_event(ev: dict[str, Any]) -> None:
                if ev.get("sessionId") != sid:
                    return
                m, p = ev["method"], ev.get("params", {})
                if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                    res.console_errors.append(f"console.{p['type']}: {_console_text(p)}")
                elif m == "Runtime.exceptionThrown":
                    d = p.get("exceptionDetails", {})
                    res.console_errors.append(
                        f"exception: {d.get('exception', {}).get('description') or d.get('text')}"
                    )
                elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                    res.console_errors.append(f"log: {p['entry'].get('text')}")
                elif m == "Network.requestWillBeSent":
                    res.requests.append(p["request"]["url"][:200])
                elif m == "Page.javascriptDialogOpening":
                    res.dialogs.append(p.get("message", ""))
                    asyncio.ensure_future(cdp.call("Page.handleJavaScriptDialog", {"accept": False}, sid))

            cdp.listeners.append(on_event)
            for domain in ("Page", "Runtime", "Log", "Network"):
                await cdp.call(f"{domain}.enable", {}, sid)
            await cdp.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                sid,
            )
            t0 = time.monotonic()
            await cdp.call("Page.navigate", {"url": url}, sid)
            while True:
                r = await cdp.call(
                    "Runtime.evaluate", {"expression": f"!!({ready})", "returnByValue": True}, sid
                )
                if r.get("result", {}).get("value") is True:
                    break
                if time.monotonic() - t0 > timeout:
                    raise TimeoutError(
                        f"{url}: not ready after {timeout} s ({ready}); errors: {res.console_errors}"
                    )
                await asyncio.sleep(0.1)
            res.load_s = time.monotonic() - t0
            for key, expr in evals.items():
                r = await cdp.call(
                    "Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True}, sid
                )
                if "exceptionDetails" in r:
                    raise CDPError(f"evaluating {key}: {r['exceptionDetails']}")
                res.values[key] = r.get("result", {}).get("value")
            shot: dict[str, Any] = {"format": "png"}
            if full_page:
                m = await cdp.call("Page.getLayoutMetrics", {}, sid)
                size = m.get("cssContentSize") or m["contentSize"]
                shot.update(
                    {
                        "captureBeyondViewport": True,
                        "clip": {
                            "x": 0,
                            "y": 0,
                            "width": width,
                            "height": min(int(size["height"]), 12000),
                            "scale": 1,
                        },
                    }
                )
            res.screenshot = base64.b64decode((await cdp.call("Page.captureScreenshot", shot, sid))["data"])
            if pdf:
                out = await cdp.call(
                    "Page.printToPDF", {"landscape": True, "printBackground": True}, sid, timeout=timeout
                )
                res.pdf = base64.b64decode(out["data"])
            await asyncio.sleep(0.2)  # late console errors (e.g. from a resize) still count
            await cdp.call("Target.closeTarget", {"targetId": target})
            return res
        finally:
            cdp.reader.cancel()
            await ws.close()
            await http.close()

    async def _png_stats(self, png: bytes, timeout: float) -> dict[str, Any]:
        http, ws, cdp = await self._connect()
        try:
            target, sid = await self._new_tab(cdp)
            b64 = base64.b64encode(png).decode()
            expr = (
                "(async () => { const img = new Image(); img.src = 'data:image/png;base64," + b64 + "';"
                " await img.decode(); const c = document.createElement('canvas'); c.width = img.width;"
                " c.height = img.height; const g = c.getContext('2d'); g.drawImage(img, 0, 0);"
                " const d = g.getImageData(0, 0, c.width, c.height).data;"
                " const seen = new Set(); let nw = 0;"
                " for (let i = 0; i < d.length; i += 4) {"
                " const k = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];"
                " seen.add(k); if (k !== 0xffffff) nw++; }"
                " return {width: c.width, height: c.height, colours: seen.size,"
                " non_white: nw / (d.length / 4)};"
                " })()"
            )
            r = await cdp.call(
                "Runtime.evaluate",
                {"expression": expr, "returnByValue": True, "awaitPromise": True},
                sid,
                timeout=timeout,
            )
            if "exceptionDetails" in r:
                raise CDPError(str(r["exceptionDetails"]))
            await cdp.call("Target.closeTarget", {"targetId": target})
            return r["result"]["value"]  # type: ignore[no-any-return]
        finally:
            cdp.reader.cancel()
            await ws.close()
            await http.close()
