#!/usr/bin/env python3
"""Drives keel's web inbox in a real headless Chromium, one command at a time.

Usage: inbox-browser-check.py BASE_URL

Reads commands on stdin, one per line, and answers each with one JSON line
on stdout ({"ok": true, ...} or {"ok": false, "error": ...}). The test that
starts it decides what happens between commands (holding calls in a running
keel, checking what the model read). Commands:

  login TOKEN              open /login, type the token, submit
  mark                     mark the page (a reload would clear the mark)
  wait-cards N             wait until N cards show; their ids, the title, the mark
  probe                    facts of the page: injected script ran?, overflow, buttons
  phone | desktop          390x844 mobile viewport, or 1000x900
  screenshot PATH          a PNG of the page
  act ID ACTION [NOTE...]  on card ID: type NOTE into the note field, press ACTION
  goto PATH                open BASE_URL + PATH
  remove-first-rule        press the first Remove button (workspace page)
  forge ID                 from another origin, auto-submit a form approving ID
  quit

Chromium is driven over the DevTools protocol on a pipe, as
html-export-check.py does (its Browser class is reused). Exit 77 with a
line starting ``SKIP:`` when no Chromium is installed.
"""

import base64
import importlib.util
import json
import os
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("html_export_check", os.path.join(HERE, "html-export-check.py"))
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

WAIT = 20.0


class Page:
    def __init__(self, browser, base):
        self.b = browser
        self.base = base.rstrip("/")
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.s = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Page", "Log"):
            browser.call(domain + ".enable", session=self.s)
        self.viewport(1000, 900, False)

    def viewport(self, width, height, mobile):
        self.b.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
            self.s,
        )

    def js(self, expr):
        r = self.b.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True}, self.s)
        if "exceptionDetails" in r:
            raise RuntimeError("script failed: %s" % r["exceptionDetails"].get("text"))
        return r["result"].get("value")

    def _forget_loads(self):
        self.b.events = [e for e in self.b.events if e.get("method") != "Page.loadEventFired"]

    def navigate(self, url):
        self._forget_loads()
        self.b.call("Page.navigate", {"url": url}, self.s)
        self.b.wait_event("Page.loadEventFired", WAIT)

    def submit(self, expr):
        """Runs expr (which submits a form) and waits for the next page."""
        self._forget_loads()
        self.js(expr)
        self.b.wait_event("Page.loadEventFired", WAIT)

    def until(self, expr, what):
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            v = self.js(expr)
            if v:
                return v
            self.b.drain(0.1)
        raise TimeoutError("timed out waiting for " + what)


def run(page, line):
    words = line.split()
    cmd, args = words[0], words[1:]
    if cmd == "login":
        page.navigate(page.base + "/login")
        token = json.dumps(args[0])
        page.submit("document.getElementById('token').value = %s; document.querySelector('form.login').requestSubmit(); true" % token)
        return {"url": page.js("location.pathname"), "title": page.js("document.title")}
    if cmd == "wait-cards":
        n = int(args[0])
        page.until("document.querySelectorAll('#cards .card').length === %d" % n, "%d cards" % n)
        page.b.drain(0.2)
        return {
            "ids": page.js("Array.from(document.querySelectorAll('#cards .card')).map(c => c.dataset.id)"),
            "title": page.js("document.title"),
            # Set by `mark`: still there means the page was not reloaded.
            "marked": page.js("window.__keelMark === 1"),
        }
    if cmd == "mark":
        page.js("window.__keelMark = 1")
        return {}
    if cmd == "probe":
        return page.js("""({
            pwned: typeof window.pwned !== 'undefined',
            text: document.body.innerText,
            overflow: document.documentElement.scrollWidth > window.innerWidth,
            wide: Array.from(document.querySelectorAll('.card, pre, form, button, input')).filter(
                e => e.getBoundingClientRect().right > window.innerWidth + 0.5).length,
            width: window.innerWidth,
            cards: Array.from(document.querySelectorAll('#cards .card')).map(c => ({
                id: c.dataset.id,
                actions: Array.from(c.querySelectorAll('button[name=action]')).map(b => b.value),
                scope: (c.querySelector('.scope') || {}).textContent || null,
            })),
            title: document.title,
        })""")
    if cmd == "phone":
        page.viewport(390, 844, True)
        page.b.drain(0.3)
        return {}
    if cmd == "desktop":
        page.viewport(1000, 900, False)
        page.b.drain(0.3)
        return {}
    if cmd == "screenshot":
        shot = page.b.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, page.s)
        with open(args[0], "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        return {}
    if cmd == "act":
        card, action, note = args[0], args[1], " ".join(args[2:])
        sel = json.dumps("#card-" + card)
        page.submit(
            "(function () { var c = document.querySelector(%s); "
            "var n = c.querySelector('input[name=note]'); if (n) n.value = %s; "
            "c.querySelector('button[value=%s]').click(); return true; })()" % (sel, json.dumps(note), action)
        )
        return {"url": page.js("location.pathname")}
    if cmd == "goto":
        page.navigate(page.base + args[0])
        return {"title": page.js("document.title")}
    if cmd == "remove-first-rule":
        page.submit("document.querySelector('ul.rules form button').click(); true")
        return {"rules": page.js("document.querySelectorAll('ul.rules form').length")}
    if cmd == "forge":
        form = (
            "<form method=post action='%s/requests/%s/decide'>"
            "<input name=action value=approve><input name=csrf value=guess></form>"
            "<script>document.forms[0].submit()</script>" % (page.base, args[0])
        )
        page.navigate("data:text/html," + urllib.parse.quote(form))
        page.b.drain(1.0)
        return {"url": page.js("location.href")}
    raise ValueError("unknown command " + cmd)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    exe = check.find_chromium()
    if not exe:
        print("SKIP: Chromium is not installed (apt-get install chromium)", flush=True)
        return 77
    with tempfile.TemporaryDirectory(prefix="keel-inbox-chromium-") as profile:
        browser = check.Browser(exe, profile)
        try:
            page = Page(browser, argv[1])
            print(json.dumps({"ok": True, "ready": True}), flush=True)
            for line in sys.stdin:
                line = line.strip()
                if not line:
                    continue
                if line == "quit":
                    break
                try:
                    reply = run(page, line)
                    reply["ok"] = True
                except Exception as e:  # noqa: BLE001 - every failure goes back to the test
                    reply = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
                print(json.dumps(reply), flush=True)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
