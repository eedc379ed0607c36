#!/usr/bin/env python3
"""Checks a keel HTML export in a real headless Chromium.

Usage: html-export-check.py PAGE.html SCREENSHOT.png [DARK_SCREENSHOT.png]

Opens PAGE.html in headless Chromium, driven over the DevTools protocol on a
pipe (no port, no extra packages), and fails (exit 1) when:

* the page logs a console error or warning, throws, or Chromium logs an
  error for it (for example a Content Security Policy violation);
* the page makes any request other than loading itself (network, fonts,
  images: everything must be inline);
* an injected ``<script>`` ran (it sets ``window.pwned``) or is missing as
  visible text;
* the page's own script did not run (its theme toggle must work);
* a thinking block is shown open (thinking is collapsed until asked for);
* the dark colour scheme does not change the page's colours.

It writes a full-page screenshot (light) and, if asked, one with
``prefers-color-scheme: dark``. Exit 77 with a line starting ``SKIP:`` when
no Chromium is installed (Debian: ``apt-get install chromium``).
"""

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT = 30.0


def find_chromium():
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """Chromium with the DevTools protocol on fds 3 (commands) and 4 (replies)."""

    def __init__(self, exe, profile):
        cmd_r, self.cmd_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-default-apps", "--disable-extensions", "--mute-audio",
            "--user-data-dir=" + profile, "--remote-debugging-pipe", "about:blank",
        ]
        # The shell puts the pipe ends on fds 3 and 4, where Chromium expects them.
        script = 'exec "$0" "$@" 3<&%d 4>&%d' % (cmd_r, resp_w)
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", script, exe] + flags,
            pass_fds=(cmd_r, resp_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(cmd_r)
        os.close(resp_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium")
            ready, _, _ = select.select([self.resp_r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.resp_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None, timeout=TIMEOUT):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s failed: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method, timeout=TIMEOUT):
        for e in self.events:
            if e.get("method") == method:
                return e
        deadline = time.monotonic() + timeout
        while True:
            e = self._read_message(deadline)
            self.events.append(e)
            if e.get("method") == method:
                return e

    def drain(self, seconds):
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read_message(deadline))
        except TimeoutError:
            pass

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def screenshot(browser, session, path):
    metrics = browser.call("Page.getLayoutMetrics", session=session)
    size = metrics.get("cssContentSize") or metrics.get("contentSize")
    height = int(min(max(size["height"], 600), 6000))
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1000, "height": height, "deviceScaleFactor": 1, "mobile": False},
        session,
    )
    shot = browser.call("Page.captureScreenshot", {"format": "png"}, session)
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    page, shot = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    dark_shot = os.path.abspath(argv[3]) if len(argv) == 4 else None
    exe = find_chromium()
    if not exe:
        print("SKIP: Chromium is not installed (apt-get install chromium); the HTML export was not checked in a browser")
        return 77
    url = "file://" + page
    problems = []
    with tempfile.TemporaryDirectory(prefix="keel-chromium-") as profile:
        browser = Browser(exe, profile)
        try:
            target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.call(
                "Target.attachToTarget", {"targetId": target, "flatten": True}
            )["sessionId"]
            for domain in ("Runtime", "Log", "Network", "Page"):
                browser.call(domain + ".enable", session=session)
            browser.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": 1000, "height": 1200, "deviceScaleFactor": 1, "mobile": False},
                session,
            )
            browser.call("Page.navigate", {"url": url}, session)
            browser.wait_event("Page.loadEventFired")
            browser.drain(0.5)
            probe = browser.call(
                "Runtime.evaluate",
                {
                    "expression": """JSON.stringify({
                        pwned: typeof window.pwned !== 'undefined',
                        injectedShown: document.body.textContent.includes('<script>window.pwned=1</script>'),
                        pageScripts: document.scripts.length,
                        tools: document.querySelectorAll('.tool').length,
                        compactions: document.querySelectorAll('.compaction').length,
                        approvals: document.querySelectorAll('.approval').length,
                        thinking: document.querySelectorAll('details.thinking').length,
                        thinkingOpen: Array.from(document.querySelectorAll('details.thinking')).filter(function (d) { return d.open; }).length,
                        background: getComputedStyle(document.documentElement).backgroundColor,
                        title: document.title
                    })""",
                    "returnByValue": True,
                },
                session,
            )
            facts = json.loads(probe["result"]["value"])
            if facts["pwned"]:
                problems.append("an injected <script> ran")
            if not facts["injectedShown"]:
                problems.append("the injected <script> is not shown as text")
            if facts["thinkingOpen"]:
                problems.append("%d thinking block(s) shown open" % facts["thinkingOpen"])
            if facts["pageScripts"] != 1:
                problems.append("expected exactly the page's own script, found %d" % facts["pageScripts"])
            toggled = browser.call(
                "Runtime.evaluate",
                {
                    "expression": "document.getElementById('theme-toggle').click();"
                    " document.documentElement.getAttribute('data-theme')",
                    "returnByValue": True,
                },
                session,
            )["result"].get("value")
            if toggled != "light":
                problems.append("the page's script did not run (theme toggle gave %r)" % toggled)
            browser.call(
                "Runtime.evaluate",
                {
                    "expression": "var b = document.getElementById('theme-toggle');"
                    " b.click(); b.click(); document.documentElement.getAttribute('data-theme')"
                },
                session,
            )
            screenshot(browser, session, shot)
            if dark_shot:
                browser.call(
                    "Emulation.setEmulatedMedia",
                    {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
                    session,
                )
                dark_bg = browser.call(
                    "Runtime.evaluate",
                    {
                        "expression": "getComputedStyle(document.documentElement).backgroundColor",
                        "returnByValue": True,
                    },
                    session,
                )["result"].get("value")
                facts["darkBackground"] = dark_bg
                if dark_bg == facts["background"]:
                    problems.append("the dark colour scheme did not change the colours (%s)" % dark_bg)
                screenshot(browser, session, dark_shot)
            browser.drain(0.3)
        finally:
            browser.close()
    for e in browser.events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            problems.append("console %s: %s" % (params["type"], args))
        elif method == "Runtime.exceptionThrown":
            problems.append("exception: %s" % params.get("exceptionDetails", {}).get("text"))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
            entry = params["entry"]
            problems.append("log %s: %s %s" % (entry.get("level"), entry.get("text"), entry.get("url", "")))
        elif method == "Network.requestWillBeSent":
            req_url = params.get("request", {}).get("url", "")
            if req_url != url and not req_url.startswith("data:"):
                problems.append("network request: %s" % req_url)
    print("page: %s" % page)
    print("facts: %s" % json.dumps(facts, sort_keys=True))
    print("screenshot: %s%s" % (shot, (" and " + dark_shot) if dark_shot else ""))
    if problems:
        for p in problems:
            print("FAIL: " + p)
        return 1
    print("OK: no console errors, no network requests, injected script shown as text")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
