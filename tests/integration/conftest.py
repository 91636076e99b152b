"""Shared pytest fixtures: where the binary, the generated fixture trees and the sources are.

Run with Debian's /usr/bin/python3 (it sees python3-grpcio); ctest sets RDMA_DP and
RDP_FIXTURES. Run by hand: RDMA_DP=build/rdma-dp RDP_FIXTURES=build/fixtures \
/usr/bin/python3 -m pytest tests/integration
"""
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def _env_path(name, default, missing):
    """The path in $name (else REPO/default), resolved; fails the test with missing (a %-format
    of the path) when it does not exist."""
    p = pathlib.Path(os.environ.get(name, str(REPO / default))).resolve()
    if not p.exists():
        pytest.fail(missing % p)
    return p


@pytest.fixture(scope="session")
def rdma_dp():
    """Absolute path of the rdma-dp binary under test."""
    return _env_path("RDMA_DP", "build/rdma-dp",
                     "rdma-dp binary not found at %s; build first or set RDMA_DP")


@pytest.fixture(scope="session")
def fixtures_dir():
    """Directory of generated fixture nodes: <dir>/<node>/sys and <dir>/<node>/dev."""
    return _env_path("RDP_FIXTURES", "build/fixtures",
                     "fixtures not found at %s; build first or set RDP_FIXTURES")


@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture
def run(rdma_dp):
    """run(*args) -> CompletedProcess of rdma-dp with text output, never raising."""

    def _run(*args, timeout=60, **kw):
        return subprocess.run([str(rdma_dp), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, **kw)

    return _run


def node_args(fixtures_dir, node):
    """--sysfs-root/--dev-root arguments for a fixture node."""
    return ["--sysfs-root", str(fixtures_dir / node / "sys"),
            "--dev-root", str(fixtures_dir / node / "dev")]


@pytest.fixture
def make_env(rdma_dp, fixtures_dir):
    """make_env(cls=kubelet.TestEnv, **kw): a daemon test's environment (kubelet.TestEnv or
    a subclass: temp kubelet root, fake kubelet, configs, daemons on fixture nodes) on the
    binary and fixtures under test; every one made is closed at the end of the test."""
    import kubelet
    made = []

    def make(cls=kubelet.TestEnv, **kw):
        e = cls(rdma_dp, fixtures_dir, **kw)
        made.append(e)
        return e

    yield make
    for e in reversed(made):
        e.close()
