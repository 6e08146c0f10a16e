"""`neuron-prof tui --serve` over loopback: the page loads, the websocket starts the app, the app answers
keys through it, and the server listens on 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import psutil
import pytest

from neuron_prof.cli import main
from tests._demo_trace import FALLBACK_SITE, demo_like_trace
from tests._pty import ANSI, pty_run

TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def pftrace(tmp_path: Path) -> Path:
    from neuron_prof.exporters import write_trace

    return write_trace(demo_like_trace(), tmp_path / "demo.pftrace")


async def _read_until(
    ws: aiohttp.ClientWebSocketResponse, needle: bytes, seen: bytearray, deadline: float
) -> bool:
    while time.monotonic() < deadline:
        try:
            msg = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            return False
        if msg.type == aiohttp.WSMsgType.BINARY:
            seen += ANSI.sub(b"", msg.data)
        elif msg.type == aiohttp.WSMsgType.TEXT:
            seen += msg.data.encode()
        elif msg.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
            return False
        if needle in seen:
            return True
    return False


async def test_serve_answers_through_its_websocket(pftrace: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_prof", "tui", str(pftrace), "--serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + TIMEOUT
    try:
        async with aiohttp.ClientSession() as http:
            # GIVEN the server is up: the page names the websocket the browser will open
            page = ""
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/") as r:
                        page = await r.text()
                        break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.2)
            assert f"ws://127.0.0.1:{port}/ws" in page, (
                proc.stdout.read().decode() if proc.poll() is not None else page
            )
            # it listens on loopback only
            listening = {
                c.laddr.ip
                for c in psutil.Process(proc.pid).net_connections(kind="inet")
                if c.status == psutil.CONN_LISTEN
            }
            assert listening == {"127.0.0.1"}
            # WHEN a browser opens the websocket, the app starts and draws the overview
            async with http.ws_connect(f"http://127.0.0.1:{port}/ws?width=160&height=48") as ws:
                await ws.send_json(["resize", {"width": 160, "height": 48}])
                seen = bytearray()
                assert await _read_until(ws, b"first_call_compile", seen, deadline), bytes(seen[-2000:])
                # THEN keys sent through the websocket reach the app: 3 opens the fallback hot spots
                await ws.send_json(["stdin", "3"])
                seen.clear()
                assert await _read_until(ws, b"host time", seen, deadline), bytes(seen[-2000:])
                assert FALLBACK_SITE.encode() in seen
                await ws.send_json(["stdin", "q"])
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_cli_rejects_missing_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tui", "/nonexistent/x.json"]) == 2
    assert "/nonexistent/x.json: no such file" in capsys.readouterr().err


def test_serve_command_quotes_paths(tmp_path: Path) -> None:
    from neuron_prof.cli._tui import serve_command

    p = tmp_path / "a b;rm -rf x.json"
    p.write_text("{}")
    cmd = serve_command([p])
    import shlex

    assert shlex.split(cmd)[-1] == str(p.resolve())
    assert shlex.split(cmd)[1:4] == ["-m", "neuron_prof", "tui"]


def test_tui_in_a_real_terminal(pftrace: Path) -> None:
    """`neuron-prof tui` in a pty: draws the overview, answers keys, `q` exits 0."""
    state = {"phase": 0}
    last = {"seen": b""}

    def drive(seen: bytes, fd: int) -> bytes | None:
        last["seen"] = seen
        if state["phase"] == 0 and b"First-call compile" in seen:  # the title: at 80 columns the kind is dropped
            state["phase"] = 1
            return b"3"
        if state["phase"] == 1 and b"host time" in seen:
            state["phase"] = 2
            return b"q"
        return None

    code, _ = pty_run([sys.executable, "-m", "neuron_prof", "tui", str(pftrace)], drive, TIMEOUT)
    assert state["phase"] == 2, last["seen"][-1500:]
    assert code == 0


def test_q_quits_at_once_while_a_big_trace_is_still_loading(tmp_path: Path) -> None:
    from bench.gen_trace import write

    big = write(300_000, tmp_path / "big.json")  # ~86 MB: seconds of parsing
    sent: list[float] = []

    def press_q_while_loading(seen: bytes, fd: int) -> bytes | None:
        if not sent and b"loading big.json" in seen:
            sent.append(time.monotonic())
            return b"q"
        return None

    code, _ = pty_run([sys.executable, "-m", "neuron_prof", "tui", str(big)], press_q_while_loading, TIMEOUT)
    gone = time.monotonic() - sent[0]
    assert code == 0
    # the parse goes on for seconds; the process must not wait for it
    assert gone < 3.0, gone
