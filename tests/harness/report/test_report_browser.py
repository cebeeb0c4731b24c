"""The variant report opened in a real headless browser (Debian's chromium) over the DevTools protocol.

Checked at a desktop (1200 px) and a phone (420 px) width: the page renders (title, sections),
every figure has a drawn box and every image decoded, no table is wider than the page (the page
never scrolls sideways; at desktop width no table needs its own scroll box either), and nothing
was logged as an error (console, uncaught exceptions, CSP violations).

Skipped where chromium is absent, unless CI=true: CI installs it beside the suite
(scripts/docker-setup.sh) and this test waits for that setup as the Docker tests do.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from harness.envs.registry import default_registry
from harness.report.variant_report import build_variant_report

CHECKS = """JSON.stringify({
  title: document.title,
  h2: [...document.querySelectorAll('h2')].map(e => e.textContent),
  svgs: [...document.querySelectorAll('figure svg')].map(s => {
    const r = s.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; }),
  imgs: [...document.images].map(i => i.complete && i.naturalWidth > 0),
  pageOverflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  tableOverflow: [...document.querySelectorAll('.wrap')].map(w => w.scrollWidth - w.clientWidth),
})"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    ready = os.environ.get("EVOBENCH_DOCKER_READY")
    if found is None and ready and os.environ.get("CI", "").lower() == "true":
        deadline = time.monotonic() + 1800  # CI installs chromium in the setup beside the suite
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(1.0)
        found = shutil.which("chromium")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is not installed (scripts/docker-setup.sh installs it under CI)")
        pytest.skip("chromium is not installed (apt-get install chromium); CI=true makes this a failure")
    return found


class DevTools:
    """A minimal Chrome DevTools protocol client over ``--remote-debugging-pipe`` (fds 3 and 4)."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_browser_r, self._w = os.pipe()
        self._r, from_browser_w = os.pipe()
        # above 10, so that placing them on 3 and 4 in the child cannot overwrite one with the other
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]

        def fds() -> None:  # the browser reads commands on fd 3 and writes replies on fd 4
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
        args += ["--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"]
        self.proc = subprocess.Popen(
            args, preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for fd in (to_browser_r, from_browser_w, *high):
            os.close(fd)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("no reply from chromium")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            self._buf += chunk
        msg, _, self._buf = self._buf.partition(b"\0")
        return json.loads(msg)  # type: ignore[no-any-return]

    def call(self, method: str, session: str | None = None, timeout: float = 15.0, **params: Any) -> Any:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            self.events.append(self._read(deadline))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5.0)
        except (OSError, TimeoutError, EOFError, RuntimeError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(f"console: {[a.get('value') for a in p.get('args', [])]}")
        elif e.get("method") == "Runtime.exceptionThrown":
            out.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
        elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(f"log: {p['entry'].get('text')}")
    return out


def _open(tools: DevTools, url: str, width: int) -> dict[str, Any]:
    target = tools.call("Target.createTarget", url="about:blank")["targetId"]
    session = tools.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    for domain in ("Runtime", "Log", "Page"):
        tools.call(f"{domain}.enable", session)
    tools.call(
        "Emulation.setDeviceMetricsOverride",
        session,
        width=width,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    tools.events.clear()
    tools.call("Page.navigate", session, url=url)
    tools.wait_for("Page.loadEventFired")
    result = tools.call("Runtime.evaluate", session, expression=CHECKS, returnByValue=True)
    checks: dict[str, Any] = json.loads(result["result"]["value"])
    checks["errors"] = _errors(tools.events)
    tools.call("Target.closeTarget", targetId=target)
    return checks


def test_variant_report_renders_in_a_headless_browser(store: Any, tmp_path: Path) -> None:
    binary = _chromium()
    v = default_registry().get("eplb-tiny")
    for s in range(3):  # three identities (two of pacevolve's configurations), one without seed 2
        common = dict(seed=s, family="eplb", variant="eplb-tiny", env_hash=v.hash, y_init=0.65, y_target=0.9)
        store.run(run_id=f"rs{s}", agent="random-search", scores=[0.70, 0.71 + 0.01 * s, 0.72], **common)
        store.run(run_id=f"pv{s}", agent="pacevolve", scores=[0.70, 0.73, 0.74 + 0.005 * s], **common)
        if s < 2:
            store.run(
                run_id=f"lg{s}", agent="pacevolve", scores=[0.70, 0.70, 0.70], config={"islands": 2}, **common
            )
    html = build_variant_report(v, store.leaderboards, store.results, n_resamples=200).html()
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    tools = DevTools(binary, tmp_path / "profile")
    try:
        wide = _open(tools, page.as_uri(), 1200)  # a desktop window (the page is at most 1180 px)
        narrow = _open(tools, page.as_uri(), 420)
    finally:
        tools.close()
    assert wide["title"] == "evobench variant eplb-tiny"
    assert wide["h2"][:3] == [
        "What was compared",
        "Leaderboard",
        "Best-so-far curves (mean across seeds, 95 % bootstrap band)",
    ]
    assert len(wide["svgs"]) == 2 and all(w > 300 and h > 200 for w, h in wide["svgs"])
    assert all(wide["imgs"])
    assert wide["pageOverflow"] <= 0 and max(wide["tableOverflow"]) <= 0, wide  # every table fits
    assert narrow["pageOverflow"] <= 0, narrow  # a phone: tables scroll in their own box, not the page
    assert all(w <= 420 for w, _ in narrow["svgs"])
    assert wide["errors"] == [] and narrow["errors"] == []
