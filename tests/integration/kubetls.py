"""A TLS API-server stand-in for the kube client's tests: PKI made by the openssl CLI, an
HTTPS server (Python's ssl) checking a bearer token, and a listener that never answers.

make_pki(dir) -> dict of paths: ca.crt/ca.key, server.crt/server.key (SAN
DNS:kubernetes.default.svc, DNS:kubernetes, IP:127.0.0.1, as kubeadm's apiserver certificate
carries), other-ca.crt (a CA that signed nothing here). RSA 2048, like kubeadm.
"""
import http.server
import json
import shutil
import socket
import ssl
import subprocess
import threading

SERVER_SANS = "DNS:kubernetes.default.svc,DNS:kubernetes,IP:127.0.0.1"


def have_openssl():
    return shutil.which("openssl") is not None


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d):
    d.mkdir(parents=True, exist_ok=True)
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key",
                 "-out", f"{ca}.crt", "-days", "2", "-subj", f"/CN={ca}", cwd=d)
    (d / "ext.cnf").write_text(f"subjectAltName={SERVER_SANS}\nbasicConstraints=CA:FALSE\n"
                               "keyUsage=digitalSignature,keyEncipherment\n"
                               "extendedKeyUsage=serverAuth\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
             "server.csr", "-subj", "/CN=kube-apiserver", cwd=d)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    return {n: d / n for n in ("ca.crt", "server.crt", "server.key", "other-ca.crt")}


NODE_A = {"apiVersion": "v1", "kind": "Node",
          "metadata": {"name": "node-a", "uid": "3f1c2a8e-0000-4000-8000-00000000000a"}}


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class ApiServer:
    """HTTPS on 127.0.0.1:<port>; GET /api/v1/nodes/node-a with the right token gives NODE_A,
    other paths 404, a wrong token 401 (Status objects as kube-apiserver sends). ALPN
    ["h2", "http/1.1"] as kube-apiserver offers. Records (token, path, tls version, alpn) of
    each request in .requests."""

    def __init__(self, pki, token):
        self.token = token
        self.requests = []
        self.lock = threading.Lock()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(pki["server.crt"], pki["server.key"])
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                auth = self.headers.get("Authorization", "")
                tok = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
                with outer.lock:
                    outer.requests.append({
                        "token": tok, "path": self.path, "version": self.request.version(),
                        "alpn": self.request.selected_alpn_protocol(),
                        "user_agent": self.headers.get("User-Agent"),
                        "accept": self.headers.get("Accept")})
                    good = tok == outer.token
                if not good:
                    self._send(401, status(401, "Unauthorized", "Unauthorized"))
                elif self.path == "/api/v1/nodes/node-a":
                    self._send(200, NODE_A)
                else:
                    name = self.path.rsplit("/", 1)[-1]
                    self._send(404, status(404, "NotFound", f'nodes "{name}" not found'))

            def _send(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class SilentServer:
    """Accepts TCP connections and never says a word (a wedged API server)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.conns = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)
        for c in self.conns:
            c.close()
