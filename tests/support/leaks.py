"""Find what a test left open: objects that warn when collected unclosed (a store's client
sockets, files), collected right after the test so the test that leaked them fails, not
whichever later test the garbage collector happened to run in.

pytest runs with `filterwarnings = error`: a `ResourceWarning` raised in a finalizer is an
"unraisable exception" pytest reports in the test that was running when the collector ran.

A full collection costs ~0.3 s once PySpark, pyarrow and boto3 are loaded (the whole heap
is traversed), too much after every test. So after each check what survived is frozen
(`gc.freeze`: moved out of the collector's sight): the next check traverses only what was
made since, ~2 ms. What a later test frees of the frozen objects is still freed by
reference counting; frozen objects in reference cycles wait for `release_frozen`, at the
end of the session.
"""

from __future__ import annotations

import gc
import warnings


def collect_leaks() -> list[str]:
    """Collect the garbage made since the last call; the messages of the `ResourceWarning`s
    finalizers raised. What survives is frozen for the next call."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    gc.freeze()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def release_frozen() -> None:
    """Hand the frozen objects back to the collector and collect them (what they held
    open is no one test's leak: not reported)."""
    gc.unfreeze()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


__all__ = ["collect_leaks", "release_frozen"]
