//! The page around the conversation: the stylesheet, the one inline
//! script (theme toggle, expand/collapse all) and the Content Security
//! Policy that allows exactly that script (by hash), inline styles and
//! `data:` images — and nothing from the network.

use base64::Engine;
use sha2::{Digest, Sha256};

/// The page's only script.
pub const SCRIPT: &str = r#"(function () {
  var root = document.documentElement;
  var order = ["auto", "light", "dark"];
  var saved = null;
  try { saved = window.localStorage.getItem("keel-theme"); } catch (e) { saved = null; }
  if (order.indexOf(saved) >= 0) { root.setAttribute("data-theme", saved); }
  var button = document.getElementById("theme-toggle");
  function label() {
    var t = root.getAttribute("data-theme") || "auto";
    button.textContent = "Theme: " + t;
  }
  if (button) {
    label();
    button.addEventListener("click", function () {
      var t = root.getAttribute("data-theme") || "auto";
      var next = order[(order.indexOf(t) + 1) % order.length];
      root.setAttribute("data-theme", next);
      try { window.localStorage.setItem("keel-theme", next); } catch (e) { /* file pages may refuse */ }
      label();
    });
  }
  function all(open) {
    var items = document.querySelectorAll("main details");
    for (var i = 0; i < items.length; i++) { items[i].open = open; }
  }
  var expand = document.getElementById("expand-all");
  var collapse = document.getElementById("collapse-all");
  if (expand) { expand.addEventListener("click", function () { all(true); }); }
  if (collapse) { collapse.addEventListener("click", function () { all(false); }); }
})();
"#;

/// `sha256-…` of [`SCRIPT`], for the CSP.
pub fn script_hash() -> String {
    let digest = Sha256::digest(SCRIPT.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The `Content-Security-Policy` of the page.
pub fn csp() -> String {
    format!(
        "default-src 'none'; script-src '{}'; style-src 'unsafe-inline'; img-src data:; \
         font-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'",
        script_hash()
    )
}

/// The stylesheet: light and dark palettes (system preference, or forced
/// by `data-theme`), system fonts only.
pub const STYLE: &str = r#"
:root {
  --bg: #f6f7f9; --panel: #ffffff; --text: #1d2330; --muted: #667085; --border: #e1e5eb;
  --user: #eef4ff; --user-border: #c7d7fe; --accent: #3b5bdb; --code-bg: #f3f4f6;
  --tool: #fafbfc; --ok: #1a7f37; --err: #c62828; --warn: #9a6700; --warn-bg: #fff8e1;
  --add: #1a7f37; --add-bg: #e6f4ea; --del: #b42318; --del-bg: #fdecea; --hunk: #6f42c1;
  --k: #8250df; --s: #0a6b3d; --c: #6e7781; --n: #b35900; --shadow: 0 1px 2px rgba(16,24,40,.06);
}
@media (prefers-color-scheme: dark) {
  html[data-theme="auto"] {
    --bg: #0f1218; --panel: #161b22; --text: #e6edf3; --muted: #8b949e; --border: #2a313c;
    --user: #172036; --user-border: #2c3e6b; --accent: #7aa2ff; --code-bg: #0d1117;
    --tool: #11161d; --ok: #3fb950; --err: #ff7b72; --warn: #d29922; --warn-bg: #2a2415;
    --add: #3fb950; --add-bg: #12261a; --del: #ff7b72; --del-bg: #2d1516; --hunk: #bc8cff;
    --k: #d2a8ff; --s: #a5d6ff; --c: #8b949e; --n: #ffa657; --shadow: none;
  }
}
html[data-theme="dark"] {
  --bg: #0f1218; --panel: #161b22; --text: #e6edf3; --muted: #8b949e; --border: #2a313c;
  --user: #172036; --user-border: #2c3e6b; --accent: #7aa2ff; --code-bg: #0d1117;
  --tool: #11161d; --ok: #3fb950; --err: #ff7b72; --warn: #d29922; --warn-bg: #2a2415;
  --add: #3fb950; --add-bg: #12261a; --del: #ff7b72; --del-bg: #2d1516; --hunk: #bc8cff;
  --k: #d2a8ff; --s: #a5d6ff; --c: #8b949e; --n: #ffa657; --shadow: none;
}
* { box-sizing: border-box; }
html { background: var(--bg); color: var(--text); }
body {
  margin: 0; font: 15px/1.55 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue",
  Arial, "Noto Sans", "Liberation Sans", sans-serif;
}
code, pre, .mono {
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace;
  font-size: 13px;
}
.wrap { max-width: 920px; margin: 0 auto; padding: 24px 20px 64px; }
header.top {
  background: var(--panel); border: 1px solid var(--border); border-radius: 12px;
  padding: 18px 22px; box-shadow: var(--shadow); margin-bottom: 22px;
}
.title-row { display: flex; align-items: flex-start; gap: 12px; }
.title-row h1 { font-size: 20px; line-height: 1.3; margin: 0; flex: 1; overflow-wrap: anywhere; }
.brand { color: var(--accent); font-weight: 700; letter-spacing: .02em; font-size: 12px; text-transform: uppercase; }
.controls { display: flex; gap: 6px; flex-wrap: wrap; justify-content: flex-end; }
button {
  font: inherit; font-size: 12px; color: var(--text); background: var(--bg); border: 1px solid var(--border);
  border-radius: 6px; padding: 3px 9px; cursor: pointer;
}
button:hover { border-color: var(--accent); }
dl.meta {
  display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px; margin: 14px 0 0;
  font-size: 13px;
}
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.totals { display: flex; flex-wrap: wrap; gap: 8px; margin-top: 14px; }
.pill {
  display: inline-block; border: 1px solid var(--border); border-radius: 999px; padding: 2px 10px;
  font-size: 12px; color: var(--muted); background: var(--bg);
}
.pill b { color: var(--text); font-weight: 600; }
.entry { margin: 14px 0; }
.msg {
  background: var(--panel); border: 1px solid var(--border); border-radius: 10px; padding: 12px 16px;
  box-shadow: var(--shadow);
}
.msg.user { background: var(--user); border-color: var(--user-border); }
.role { font-size: 12px; font-weight: 600; color: var(--muted); margin-bottom: 4px; display: flex; gap: 8px; align-items: baseline; }
.role .who { color: var(--text); }
.role time { margin-left: auto; font-weight: 400; }
.md > :first-child { margin-top: 0; }
.md > :last-child { margin-bottom: 0; }
.md p, .md ul, .md ol, .md table, .md blockquote { margin: .55em 0; }
.md code { background: var(--code-bg); border: 1px solid var(--border); border-radius: 4px; padding: 0 4px; }
.md pre code, pre code { background: none; border: 0; padding: 0; }
.md table { border-collapse: collapse; }
.md th, .md td { border: 1px solid var(--border); padding: 3px 8px; }
.md blockquote { border-left: 3px solid var(--border); margin-left: 0; padding-left: 12px; color: var(--muted); }
.md a, a { color: var(--accent); }
pre {
  background: var(--code-bg); border: 1px solid var(--border); border-radius: 8px; padding: 10px 12px;
  overflow-x: auto; margin: 8px 0; white-space: pre-wrap; overflow-wrap: anywhere;
}
.k { color: var(--k); } .s { color: var(--s); } .c { color: var(--c); font-style: italic; } .n { color: var(--n); }
.d-add { color: var(--add); background: var(--add-bg); display: inline-block; width: 100%; }
.d-del { color: var(--del); background: var(--del-bg); display: inline-block; width: 100%; }
.d-hunk { color: var(--hunk); } .d-meta { color: var(--muted); font-weight: 600; }
details > summary { cursor: pointer; color: var(--muted); font-size: 13px; }
details.thinking { border-left: 3px solid var(--border); padding: 2px 0 2px 10px; margin: 6px 0; }
details.thinking .md { color: var(--muted); font-style: italic; margin-top: 6px; }
.tool {
  border: 1px solid var(--border); border-radius: 8px; background: var(--tool); margin: 10px 0;
  overflow: hidden;
}
.tool-head { display: flex; gap: 8px; align-items: center; padding: 6px 10px; border-bottom: 1px solid var(--border); font-size: 13px; }
.tool-name { font-weight: 700; }
.tool-summary { color: var(--muted); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; flex: 1; }
.status { font-weight: 700; }
.status.ok { color: var(--ok); } .status.err { color: var(--err); } .status.wait { color: var(--warn); }
.tool-body { padding: 4px 10px 8px; }
.tool-body .label { font-size: 11px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); margin-top: 6px; }
.tool.err .tool-head { background: var(--del-bg); }
.approval {
  display: inline-block; margin: 6px 0 2px; padding: 2px 8px; border-radius: 6px; font-size: 12px;
  background: var(--warn-bg); color: var(--warn); border: 1px solid var(--border);
}
.approval.ok { color: var(--ok); background: var(--add-bg); }
.approval.stop { color: var(--err); background: var(--del-bg); }
.approval-facts { color: var(--muted); }
.error-box { margin-top: 8px; padding: 8px 10px; border-radius: 8px; background: var(--del-bg); color: var(--err); font-size: 13px; }
.usage { margin-top: 6px; font-size: 11px; color: var(--muted); }
.event { font-size: 12px; color: var(--muted); text-align: center; margin: 10px 0; }
.event span { background: var(--bg); padding: 0 8px; }
.compaction {
  border: 1px dashed var(--accent); border-radius: 10px; padding: 10px 14px; margin: 18px 0;
  background: var(--panel);
}
.compaction .badge { font-weight: 700; color: var(--accent); font-size: 13px; }
.compacted { opacity: .62; }
.compacted-note { font-size: 11px; color: var(--muted); margin-left: 6px; }
details.fork { margin: 10px 0 10px 18px; border-left: 2px solid var(--border); padding-left: 12px; }
details.fork > summary { font-size: 12px; }
.image { max-width: 100%; border-radius: 6px; border: 1px solid var(--border); }
footer { margin-top: 30px; font-size: 12px; color: var(--muted); text-align: center; }
"#;
