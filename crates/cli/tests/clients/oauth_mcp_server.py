"""A remote MCP server behind OAuth 2.1, on 127.0.0.1, for keel's login
tests: protected-resource metadata (RFC 9728), authorization-server
metadata (RFC 8414), dynamic client registration (RFC 7591), an
authorization endpoint that approves at once (PKCE S256 required), a token
endpoint (authorization code and refresh token, refresh tokens rotated),
and a streamable-HTTP MCP endpoint (JSON answers) with one tool, `whoami`,
that needs a live access token.

Usage: oauth_mcp_server.py PORT_FILE [EXPIRES_IN]. The port it listens on
is written to PORT_FILE. Admin routes for the test: POST /admin/revoke
(every token dies), GET /admin/log (what happened, as JSON)."""

import base64
import hashlib
import json
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EXPIRES_IN = int(sys.argv[2]) if len(sys.argv) > 2 else 3600
LOCK = threading.Lock()
CLIENTS = {}
CODES = {}  # code -> (client_id, challenge, redirect_uri)
ACCESS = {}  # token -> expiry (epoch seconds)
REFRESH = {}  # token -> client_id
LOG = {"registered": 0, "authorized": 0, "code_grants": 0, "refresh_grants": 0,
       "refused_refresh": 0, "mcp_unauthorized": 0, "tool_calls": [], "bearer_seen": []}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def base(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def send(self, status, body=None, headers=None, content_type="application/json"):
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        base = self.base()
        if url.path.startswith("/.well-known/oauth-protected-resource"):
            return self.send(200, {"resource": f"{base}/mcp", "authorization_servers": [base],
                                   "scopes_supported": ["mcp"]})
        if url.path == "/.well-known/oauth-authorization-server":
            return self.send(200, {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "registration_endpoint": f"{base}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "scopes_supported": ["mcp"],
            })
        if url.path == "/authorize":
            q = dict(urllib.parse.parse_qsl(url.query))
            if q.get("code_challenge_method") != "S256" or q.get("client_id") not in CLIENTS:
                return self.send(400, {"error": "invalid_request"})
            if q.get("redirect_uri") not in CLIENTS[q["client_id"]]:
                return self.send(400, {"error": "invalid_request", "error_description": "redirect_uri"})
            code = secrets.token_urlsafe(16)
            with LOCK:
                CODES[code] = (q["client_id"], q["code_challenge"], q["redirect_uri"])
                LOG["authorized"] += 1
            back = q["redirect_uri"] + "?" + urllib.parse.urlencode(
                {"code": code, "state": q.get("state", ""), "iss": base})
            return self.send(302, headers={"Location": back})
        if url.path == "/admin/log":
            return self.send(200, LOG)
        if url.path == "/mcp":
            return self.send(405)
        return self.send(404, {"error": "not_found"})

    def do_DELETE(self):
        return self.send(405)

    def do_POST(self):
        url = urllib.parse.urlparse(self.path)
        raw = self.body()
        if url.path == "/register":
            meta = json.loads(raw or b"{}")
            client_id = "client-" + secrets.token_hex(4)
            with LOCK:
                CLIENTS[client_id] = meta.get("redirect_uris", [])
                LOG["registered"] += 1
            return self.send(201, {**meta, "client_id": client_id, "token_endpoint_auth_method": "none"})
        if url.path == "/token":
            form = dict(urllib.parse.parse_qsl(raw.decode()))
            grant = form.get("grant_type")
            with LOCK:
                if grant == "authorization_code":
                    entry = CODES.pop(form.get("code", ""), None)
                    verifier = form.get("code_verifier", "")
                    digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                    if entry is None or entry[1] != digest or entry[2] != form.get("redirect_uri"):
                        return self.send(400, {"error": "invalid_grant"})
                    LOG["code_grants"] += 1
                    return self.send(200, self.tokens(entry[0]))
                if grant == "refresh_token":
                    client = REFRESH.pop(form.get("refresh_token", ""), None)
                    if client is None:
                        LOG["refused_refresh"] += 1
                        return self.send(400, {"error": "invalid_grant"})
                    LOG["refresh_grants"] += 1
                    return self.send(200, self.tokens(client))
            return self.send(400, {"error": "unsupported_grant_type"})
        if url.path == "/admin/revoke":
            with LOCK:
                ACCESS.clear()
                REFRESH.clear()
            return self.send(200, {})
        if url.path == "/mcp":
            return self.mcp(raw)
        return self.send(404, {"error": "not_found"})

    def tokens(self, client_id):
        access, refresh = "at-" + secrets.token_hex(8), "rt-" + secrets.token_hex(8)
        ACCESS[access] = time.time() + EXPIRES_IN
        REFRESH[refresh] = client_id
        return {"access_token": access, "token_type": "Bearer", "expires_in": EXPIRES_IN,
                "refresh_token": refresh, "scope": "mcp"}

    def mcp(self, raw):
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else ""
        with LOCK:
            live = ACCESS.get(token, 0) > time.time()
            if not live:
                LOG["mcp_unauthorized"] += 1
            else:
                LOG["bearer_seen"].append(token)
        if not live:
            meta = f"{self.base()}/.well-known/oauth-protected-resource/mcp"
            return self.send(401, {"error": "invalid_token"},
                             {"WWW-Authenticate": f'Bearer error="invalid_token", resource_metadata="{meta}"'})
        msg = json.loads(raw)
        if "id" not in msg:
            return self.send(202)
        method = msg.get("method")
        if method == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "oauth-test", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "whoami", "description": "Says who is signed in",
                                 "inputSchema": {"type": "object", "properties": {}},
                                 "annotations": {"readOnlyHint": True}}]}
        elif method == "tools/call":
            with LOCK:
                LOG["tool_calls"].append(token)
            result = {"content": [{"type": "text", "text": "signed in with a live token"}]}
        else:
            return self.send(200, {"jsonrpc": "2.0", "id": msg["id"],
                                   "error": {"code": -32601, "message": "unknown method"}})
        return self.send(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
