"""The CLI's side of joining a Ray cluster as a driver (`luma campaign plan|run|bench
--cluster`): Ray's token authentication in this process's environment, where Ray reads it
(experiments/fleet/auth.py says which token), and Ray's own output kept off stdout."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys

from luma.experiments.fleet import auth
from luma.experiments.fleet.head import disconnect


#: Ray's notice that it re-runs a task whose node died: the campaign's state and progress line
#: say the same (experiments/fleet/attempts.py), in a line instead of a paragraph.
_RETRY_NOTICE = re.compile(r"Task \S+ failed\. There are \d+ retries remaining, so the task will be retried")


class _Notices(io.TextIOBase):
    """Ray's notices to this driver, line by line, onto `sink` -- but those the state keeps."""

    def __init__(self, sink):
        self.sink, self.pending = sink, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            if not _RETRY_NOTICE.search(line):
                self.sink.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.sink.flush()


@contextlib.contextmanager
def on_cluster(settings):
    """Inside: Ray's authentication set for this process (the user's RAY_AUTH_* variables, else
    the project's token), and Ray's output on stderr. Ray prints the cluster's own notices (a
    task retried after its node died; its C++ core's log lines at shutdown) on this process's
    stdout; they belong with the progress on stderr, so stdout stays the result (--format json),
    but for the notice of a task retried after its node died: the campaign's state and progress
    name the node. The driver leaves the cluster inside."""
    given = auth.resolve(settings.home, os.environ, create=False)
    saved_env = {k: os.environ.get(k) for k in given.env}
    os.environ.update(given.env)  # Ray reads its authentication from the environment only
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(_Notices(sys.stderr)):
            yield
            disconnect()
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        # Restored as it was: nothing after the cluster reads these (no code reads them later).
        for k in saved_env:
            os.environ.pop(k, None)
        os.environ.update({k: v for k, v in saved_env.items() if v is not None})
