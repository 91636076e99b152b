"""rdma-dp kube-get against a TLS API-server stand-in (kubetls.py): the client of the DRA
driver end to end (mbedTLS, CA, server name, bearer token, timeouts, token rotation)."""
import json
import socket
import subprocess
import threading
import time

import pytest

import kubetls

pytestmark = pytest.mark.skipif(not kubetls.have_openssl(), reason="openssl CLI not installed")

TOKEN = "tok-" + "a" * 40


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return kubetls.make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def token_file(tmp_path):
    p = tmp_path / "token"
    p.write_text(TOKEN + "\n")
    return p


@pytest.fixture
def server(pki):
    s = kubetls.ApiServer(pki, TOKEN)
    yield s
    s.close()


def kube_get(run, url, token_file, ca, *extra, path="/api/v1/nodes/node-a", timeout=60):
    return run("kube-get", "--api-server", url, "--token-file", token_file, "--ca-file", ca,
               *extra, path, timeout=timeout)


def test_get_node_over_tls(run, server, pki, token_file):
    r = kube_get(run, server.url, token_file, pki["ca.crt"], "-v")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == kubetls.NODE_A
    # mbedTLS 2.28 speaks TLS 1.2 only; ALPN picks http/1.1 from the server's h2, http/1.1
    assert "TLSv1.2, ALPN http/1.1" in r.stderr
    (req,) = server.requests
    assert req["version"] == "TLSv1.2" and req["alpn"] == "http/1.1"
    assert req["token"] == TOKEN and req["accept"] == "application/json"
    assert req["user_agent"].startswith("rdma-dp/")


def test_not_found_says_the_status_message(run, server, pki, token_file):
    r = kube_get(run, server.url, token_file, pki["ca.crt"], path="/api/v1/nodes/node-z")
    assert r.returncode == 1
    assert 'GET /api/v1/nodes/node-z: 404 Not Found: nodes "node-z" not found' in r.stderr


def test_wrong_ca_is_refused(run, server, pki, token_file):
    r = kube_get(run, server.url, token_file, pki["other-ca.crt"])
    assert r.returncode == 1
    assert "certificate failed verification for name 'kubernetes.default.svc'" in r.stderr
    assert "not correctly signed by the trusted CA" in r.stderr
    assert server.requests == []


def test_ip_san_cannot_be_verified_by_mbedtls(run, server, pki, token_file):
    # the certificate carries IP:127.0.0.1, but mbedTLS 2.28 compares names with DNS SANs only
    r = kube_get(run, server.url, token_file, pki["ca.crt"], "--api-server-name", "127.0.0.1")
    assert r.returncode == 1
    assert "for name '127.0.0.1'" in r.stderr and "Common Name" in r.stderr
    r = kube_get(run, server.url, token_file, pki["ca.crt"], "--api-server-name", "kubernetes")
    assert r.returncode == 0, r.stderr


def test_wrong_token_is_401(run, server, pki, tmp_path):
    bad = tmp_path / "bad-token"
    bad.write_text("not-the-token")
    r = kube_get(run, server.url, bad, pki["ca.crt"])
    assert r.returncode == 1
    assert "401 Unauthorized: the API server refused the token" in r.stderr
    # the token was read again and the request sent once more, then the 401 stood
    assert [q["token"] for q in server.requests] == ["not-the-token"] * 2


def test_silent_server_times_out_within_the_bound(run, pki, token_file):
    s = kubetls.SilentServer()
    try:
        t0 = time.monotonic()
        r = kube_get(run, s.url, token_file, pki["ca.crt"], "--timeout-ms", "1500", timeout=30)
        took = time.monotonic() - t0
    finally:
        s.close()
    assert r.returncode == 1
    assert "timed out" in r.stderr, r.stderr
    assert 1.3 < took < 5, took


def test_refused_connection(run, pki, token_file):
    # a bound port nobody listens on refuses connections, and stays ours meanwhile
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"https://127.0.0.1:{s.getsockname()[1]}"
        r = kube_get(run, url, token_file, pki["ca.crt"], "--timeout-ms", "2000")
    assert r.returncode == 1
    assert "Connection refused" in r.stderr


def test_token_rotated_between_two_requests(run, rdma_dp, server, pki, token_file):
    new = "tok-" + "b" * 40
    p = subprocess.Popen([str(rdma_dp), "kube-get", "--api-server", server.url, "--token-file",
                          str(token_file), "--ca-file", str(pki["ca.crt"]), "--repeat", "2",
                          "--interval-ms", "1500", "-v", "/api/v1/nodes/node-a"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.requests, "no first request"
    # kubelet's projected token: a new file swapped in; the server now takes only the new one
    tmp = token_file.with_suffix(".new")
    tmp.write_text(new)
    tmp.rename(token_file)
    with server.lock:
        server.token = new
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert [q["token"] for q in server.requests] == [TOKEN, new]
    # one connection kept alive for both, the token read at start and after the rename
    assert "2 request(s), 1 connection(s), 2 token read(s), 0 401(s)" in err


def test_usage_errors(run):
    r = run("kube-get", "/api")
    assert r.returncode == 2 and "not running in a pod" in r.stderr
    r = run("kube-get", "--api-server", "https://api.example.com:6443", "--token-file", "t",
            "--ca-file", "c", "/api")
    assert r.returncode == 2 and "is not an IP address" in r.stderr
    r = run("kube-get", "--api-server", "https://127.0.0.1:70000", "--token-file", "t",
            "--ca-file", "c", "/api")
    assert r.returncode == 2
    r = run("kube-get", "--help")
    assert r.returncode == 0 and "diagnostic" in r.stdout


def test_missing_token_file(run, server, pki, tmp_path):
    r = kube_get(run, server.url, tmp_path / "nope", pki["ca.crt"])
    assert r.returncode == 1
    assert "cannot read token file" in r.stderr and "No such file" in r.stderr


def test_concurrent_clients_do_not_interfere(run, server, pki, token_file):
    results = []

    def one():
        results.append(kube_get(run, server.url, token_file, pki["ca.crt"]).returncode)

    ts = [threading.Thread(target=one) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert results == [0] * 4
