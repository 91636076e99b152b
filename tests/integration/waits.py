# SPDX-License-Identifier: MIT
"""The one wait loop of the test stand-ins (kubelet.py, dra_kubelet.py, fake_apiserver.py)."""
import time


def wait_until(cond, pred, timeout, fail, step=0.5):
    """Waits on cond (a threading.Condition its owner notifies on every change) until pred(),
    called under its lock, is true, checking at least every step seconds; returns pred()'s
    value. On timeout raises TimeoutError(fail()), fail() called under the lock."""
    deadline = time.monotonic() + timeout
    with cond:
        while True:
            v = pred()
            if v:
                return v
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(fail())
            cond.wait(min(left, step))
