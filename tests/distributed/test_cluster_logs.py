"""The traceback Dask's own `sync()` race logs after an interrupt is dropped; other tracebacks are not."""

from __future__ import annotations

import logging
import os
import sys

from chakra.distributed.cluster import _InterruptedSyncFilter


def _record_from(filename: str, func: str) -> logging.LogRecord:
    # The same shape as distributed.utils.sync's callback: a closure reading a variable the
    # interrupted call never assigned (NameError: cannot access free variable ...), its code
    # object renamed as if it lived in `filename` under the name `func`.
    def outer():
        future: int

        def cancel():
            return future  # noqa: F821 - unassigned on purpose

        return cancel

    callback = outer()
    callback.__code__ = callback.__code__.replace(co_filename=filename, co_name=func)
    try:
        callback()
    except NameError:
        exc_info = sys.exc_info()
    return logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, "Exception in callback", (), exc_info)


def test_dask_cancel_race_is_dropped_and_other_errors_kept():
    f = _InterruptedSyncFilter()
    dask_file = os.path.join("site-packages", "distributed", "utils.py")
    assert not f.filter(_record_from(dask_file, "cancel"))
    assert f.filter(_record_from(dask_file, "other"))  # another Dask callback failing: still said
    assert f.filter(_record_from(os.path.join("site-packages", "mine.py"), "cancel"))
    assert f.filter(logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, "no traceback", (), None))


def test_dask_client_installs_the_filter_once():
    import pytest

    pytest.importorskip("distributed")
    from chakra.distributed.cluster import _quiet_interrupted_sync

    log = logging.getLogger("tornado.application")
    _quiet_interrupted_sync()
    _quiet_interrupted_sync()
    assert sum(isinstance(x, _InterruptedSyncFilter) for x in log.filters) == 1
