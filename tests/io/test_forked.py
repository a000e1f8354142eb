"""A check run in a forked child (io/forked.py): its value or its exception comes back; where no fork is safe, or the
child gives no answer, the check runs in this process."""

from __future__ import annotations

import os
import threading

import pytest

from deployctl.core.errors import LayoutError, Problem
from deployctl.io.forked import Forked


def test_the_childs_value_and_pid():
    parent = os.getpid()
    job = Forked(lambda: (os.getpid(), [1, {"a": 2}]))
    pid, value = job.result()
    assert pid != parent and value == [1, {"a": 2}]


def test_the_childs_refusal_is_raised_here_whole():
    def refuse():
        raise LayoutError("MindIE 2.2 would refuse the files", hint="change engine.config",
                          problems=[Problem("maxSeqLen too large", "engine.config.x", "inv.yaml", 7, hint="h")])

    with pytest.raises(LayoutError) as exc:
        Forked(refuse).result()
    assert exc.value.message == "MindIE 2.2 would refuse the files" and exc.value.hint == "change engine.config"
    assert [(p.message, p.path, p.line) for p in exc.value.problems] == [("maxSeqLen too large", "engine.config.x", 7)]


def test_a_child_that_dies_without_an_answer_is_asked_again_here():
    calls = []

    def dies_in_the_child():
        calls.append(os.getpid())
        if len(calls) == 1 and os.getpid() != parent:
            os._exit(9)                               # killed, out of memory: no answer
        return "here"

    parent = os.getpid()
    assert Forked(dies_in_the_child).result() == "here"


def test_no_fork_while_another_thread_runs():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert Forked(os.getpid).result() == os.getpid()
    finally:
        stop.set()
        other.join()


def test_cancel_stops_and_reaps_the_child():
    job = Forked(lambda: threading.Event().wait(60))
    pid = job._pid
    assert pid is not None
    with job:
        pass
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_asked_again_the_same_answer_without_running_it_here():
    here = []

    def fn():
        here.append(os.getpid())
        return len(here)

    job = Forked(fn)
    assert job.result() == 1 and job.result() == 1
    assert here == []                                 # it ran in the child only

    def refuse():
        raise LayoutError("refused")

    job = Forked(refuse)
    for _ in range(2):
        with pytest.raises(LayoutError, match="refused"):
            job.result()


def test_an_error_in_the_block_gives_way_to_the_childs_refusal():
    def refuse():
        raise LayoutError("the plan is refused")

    with pytest.raises(LayoutError, match="the plan is refused"):
        with Forked(refuse).first():
            raise ValueError("what came after the plan")
    with pytest.raises(ValueError, match="after"):              # the child accepted: the block's own error
        with Forked(lambda: None).first():
            raise ValueError("what came after the plan")


def test_an_interrupt_in_the_block_stops_the_child():
    job = Forked(lambda: threading.Event().wait(60))
    pid = job._pid
    with pytest.raises(KeyboardInterrupt):
        with job.first():
            raise KeyboardInterrupt
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
