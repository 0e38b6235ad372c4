"""Joining a cluster from the CLI (cli/ray_session.py): Ray's notices go to stderr, except the
retry paragraph the campaign's state and progress line already say in a line."""

from __future__ import annotations

import io

from luma.cli.ray_session import _Notices

RETRY = ("\x1b[33m(raylet)\x1b[0m Task run_unit failed. There are 3 retries remaining, so the task will be retried. "
         "Error: Task failed because the node it was running on is dead or unavailable. Node IP: 127.0.0.1")


def test_the_retry_paragraph_is_left_out_and_every_other_notice_kept():
    sink = io.StringIO()
    out = _Notices(sink)
    out.write("first notice\n" + RETRY + "\nhalf ")
    out.write("a line\n")
    assert sink.getvalue() == "first notice\nhalf a line\n"
