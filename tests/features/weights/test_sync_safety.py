"""Issue 34, without hosts: the node scripts of `weights sync` run here against directories standing in for a
source and a node (``Here``: the real scripts, the way SshExecutor runs them), and the checks made before a byte
moves. What it shows: no link is followed on either side, a part file is deployctl's own or is not used, a copy
given up on leaves no part file, a copy is never more readable than its source, sizes are bounded."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess

import pytest
from support import FakeExecutor

from deployctl.core.checkpoint.files import IndexFile
from deployctl.io.executor import HostError, HostTarget
from deployctl.features.weights.listing import FileState, listing_argv, parse_listing
from deployctl.features.weights.localfs import local_listing, read_index
from deployctl.features.weights.relay import SPARE, Source, copy_file, room
from deployctl.features.weights.remote import (PART, dest_argv, parse_append, parse_part, parse_sha, parse_source_head,
                                      parse_space, source_argv)
from deployctl.features.weights.sync import SHARD_OVERHEAD, check_sizes

NODE = HostTarget("node2", "10.0.0.2")
NAME = "model-00001-of-00002.safetensors"
DATA = bytes(range(256)) * 12_000                     # ~3 MB: more than one relay chunk


class Here(FakeExecutor):
    """An executor whose node is this machine: run() and streamed sessions run the argv here."""

    def __init__(self):
        super().__init__(here=True, timeout=60)

    def client(self, target):
        return self

    def get_transport(self):
        return self

    def open_session(self, timeout=None):
        return _Session(self)


class _Session:
    def __init__(self, ex):
        self.ex, self.proc = ex, None

    def settimeout(self, seconds):
        pass

    def exec_command(self, command):
        argv = shlex.split(command)
        self.ex.calls.append((NODE.name, argv))
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def recv(self, n):
        return os.read(self.proc.stdout.fileno(), n)

    def sendall(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def shutdown_write(self):
        self.proc.stdin.close()

    def recv_exit_status(self):
        return self.proc.wait()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def sides(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "node"
    src.mkdir()
    dst.mkdir()
    (src / NAME).write_bytes(DATA)
    (src / NAME).chmod(0o640)
    victim = tmp_path / "victim"
    victim.write_bytes(b"victim: 19 bytes..\n")
    victim.chmod(0o600)
    return Source(f"local:{src}", str(dst), local=src), dst, victim


def copy(source, dst, ex=None, progress=lambda n, b: None):
    notes = []
    start = copy_file(ex or Here(), source, NODE, str(dst), NAME, len(DATA), 30, progress, notes.append)
    return start, notes


def umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


# --------------------------------------------------------------------------- the destination's part file

def test_a_copy_lands_with_the_sources_mode_and_no_part_left(sides):
    source, dst, _ = sides
    assert copy(source, dst) == (0, [])
    assert (dst / NAME).read_bytes() == DATA and not (dst / (NAME + PART)).exists()
    assert (dst / NAME).stat().st_mode & 0o777 == 0o640 & ~umask()


def test_a_planted_link_as_part_file_is_removed_not_written_through(sides):
    source, dst, victim = sides
    (dst / (NAME + PART)).symlink_to(victim)
    start, notes = copy(source, dst)
    assert start == 0 and "symbolic link" in notes[0] and "removed" in notes[0]
    assert victim.read_bytes() == b"victim: 19 bytes..\n" and not (dst / NAME).is_symlink()
    assert (dst / NAME).read_bytes() == DATA


def test_a_hard_link_as_part_file_is_not_trusted(sides):
    source, dst, victim = sides
    os.link(victim, dst / (NAME + PART))            # mode 600, ours, but another name for the victim
    start, notes = copy(source, dst)
    assert start == 0 and "hard" in notes[0]
    assert victim.read_bytes() == b"victim: 19 bytes..\n" and (dst / NAME).read_bytes() == DATA


@pytest.mark.parametrize("mode, why", [(0o644, "mode 600"), (0o660, "mode 600")])
def test_a_part_file_of_another_mode_is_not_trusted(sides, mode, why):
    source, dst, _ = sides
    part = dst / (NAME + PART)
    part.write_bytes(DATA[:1000])
    part.chmod(mode)
    start, notes = copy(source, dst)
    assert start == 0 and why in notes[0] and (dst / NAME).read_bytes() == DATA


@pytest.mark.slow
def test_a_part_file_is_resumed_only_when_its_bytes_are_the_sources(sides):
    source, dst, _ = sides
    part = dst / (NAME + PART)
    part.write_bytes(DATA[:1_500_000])
    part.chmod(0o600)
    assert copy(source, dst) == (1_500_000, [])
    assert (dst / NAME).read_bytes() == DATA
    (dst / NAME).unlink()
    part.write_bytes(b"another revision" + DATA[16:1_500_000])
    part.chmod(0o600)
    start, notes = copy(source, dst)
    assert start == 0 and "not the source's" in notes[0] and (dst / NAME).read_bytes() == DATA


def test_a_source_that_changes_while_copied_leaves_no_part_file(sides):
    source, dst, _ = sides

    def shrink(node, nbytes):
        if nbytes:
            os.truncate(source.local / NAME, 1_500_000)

    with pytest.raises(HostError, match="changed while copying"):
        copy(source, dst, progress=shrink)
    assert sorted(os.listdir(dst)) == []


def test_a_part_directory_or_a_linked_directory_on_the_way_is_not_touched(sides, tmp_path):
    source, dst, _ = sides
    (dst / (NAME + PART)).mkdir()
    with pytest.raises(HostError, match="a directory"):
        copy(source, dst)
    assert (dst / (NAME + PART)).is_dir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (dst / "sub").symlink_to(elsewhere)
    r = subprocess.run(dest_argv("append", str(dst), "sub/x.bin", 0, 3), input=b"abc", capture_output=True)
    assert r.stdout == b"no link\n" and r.returncode == 3 and list(elsewhere.iterdir()) == []


def append(dst, offset, size, data):
    return subprocess.run(dest_argv("append", str(dst), NAME, offset, size), input=data, capture_output=True)


def test_the_writer_takes_no_more_than_the_size_and_keeps_an_interrupted_part(tmp_path):
    r = append(tmp_path, 0, 10, b"0123456789X")
    assert r.stdout.decode().split("\n")[:2] == ["ready", "error long"] and r.returncode == 4
    assert not (tmp_path / (NAME + PART)).exists()
    r = append(tmp_path, 0, 10, b"01234")                 # the input ends early: a dropped connection
    assert r.stdout.decode().split("\n")[1] == "short 5" and r.returncode == 5
    assert (tmp_path / (NAME + PART)).read_bytes() == b"01234"
    assert (tmp_path / (NAME + PART)).stat().st_mode & 0o777 == 0o600
    r = append(tmp_path, 4, 10, b"456789")               # resumed from the wrong byte: refused
    assert r.stdout == b"no changed\n" and r.returncode == 3
    r = append(tmp_path, 5, 10, b"56789")
    assert r.stdout.decode().split("\n")[1] == "wrote 5"
    assert (tmp_path / (NAME + PART)).read_bytes() == b"0123456789"


def test_finish_never_replaces_a_link_at_the_files_name(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"x")
    append(tmp_path, 0, 3, b"abc")
    (tmp_path / NAME).symlink_to(victim)
    r = subprocess.run(dest_argv("finish", str(tmp_path), NAME, 3, "644"), capture_output=True, text=True)
    assert r.stdout == "no final\n" and victim.read_bytes() == b"x" and (tmp_path / NAME).is_symlink()
    assert not (tmp_path / (NAME + PART)).exists()


# --------------------------------------------------------------------------- the source

def test_the_source_script_reads_no_link_and_no_file_of_another_size(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"0123456789")
    (tmp_path / "l.bin").symlink_to(tmp_path / "f.bin")
    (tmp_path / "d").symlink_to(tmp_path)

    def read(name, *numbers):
        return subprocess.run(source_argv("read", str(tmp_path), name, *numbers), capture_output=True)

    assert read("f.bin", 10, 4).stdout == b"ok " + f"{(tmp_path / 'f.bin').stat().st_mode & 0o777:o}".encode() \
        + b"\n456789"
    assert read("l.bin", 10, 0).stdout == b"no link\n"
    assert read("d/f.bin", 10, 0).stdout == b"no link\n"
    assert read("f.bin", 11, 0).stdout == b"no size 10\n"
    assert read("nope.bin", 10, 0).stdout == b"no missing\n"
    r = subprocess.run(source_argv("cat", str(tmp_path), "l.bin", 100), capture_output=True, text=True)
    assert r.returncode == 3 and r.stdout == "" and "symbolic link" in r.stderr


def test_the_listing_names_links_and_reads_none(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.bin").write_bytes(b"abc")
    (tmp_path / "l.bin").symlink_to(tmp_path / "sub" / "a.bin")
    (tmp_path / "ld").symlink_to(tmp_path / "sub")
    os.mkfifo(tmp_path / "fifo")
    names = ["sub/a.bin", "l.bin", "ld/a.bin", "fifo", "sub/a.bin/x"]
    for hashes in (False, True):
        r = subprocess.run(listing_argv(str(tmp_path), names, hashes), capture_output=True, text=True, timeout=30)
        got = parse_listing(r.stdout, names, hashes)
        assert [s.state for s in got.values()] == ["ok", "link", "link", "notfile", "notfile"]
    assert local_listing(tmp_path, names, True) == got


def test_a_local_index_behind_a_link_is_refused(tmp_path):
    (tmp_path / "real.json").write_text('{"metadata": {"total_size": 1}, "weight_map": {}}')
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors.index.json").symlink_to(tmp_path / "real.json")
    with pytest.raises(HostError, match="symbolic link"):
        read_index(ckpt, "local")


# --------------------------------------------------------------------------- sizes and room, before a byte moves

def ok(size):
    return FileState("ok", size)


NAMES = ["config.json", "model.safetensors.index.json", "s1.safetensors", "s2.safetensors"]


def test_the_shards_may_not_hold_more_than_the_index_allows():
    index = IndexFile.model_validate({"metadata": {"total_size": 4_000_000}, "weight_map": {}})
    ref = {"config.json": ok(300), "model.safetensors.index.json": ok(200), "s1.safetensors": ok(2_000_100),
           "s2.safetensors": ok(2_000_100)}
    check_sizes("node1", index, ref, NAMES)
    ref["s2.safetensors"] = ok(4_000_000 + 2 * SHARD_OVERHEAD)               # a sparse runaway file
    with pytest.raises(HostError, match="s2.safetensors") as exc:
        check_sizes("node1", index, ref, NAMES)
    assert "total_size (4,000,000)" in exc.value.message and exc.value.host == "node1"
    with pytest.raises(HostError, match="no metadata.total_size"):
        check_sizes("node1", IndexFile.model_validate({"weight_map": {}}), {**ref, "s2.safetensors": ok(1)}, NAMES)
    with pytest.raises(HostError, match="config.json"):
        check_sizes("node1", index, {**ref, "s2.safetensors": ok(1), "config.json": ok(2 << 20)}, NAMES)


def Space(answer):
    return FakeExecutor({"deployctl-space": (0, answer)})      # any other command fails the test


def test_the_room_counts_the_copies_one_after_another():
    files = [("a", 100 << 20), ("b", 100 << 20)]
    free = (200 << 20) + SPARE
    assert room(Space(f"space {free}\n"), NODE, "/data/w", files, {}, 5) is None
    short = room(Space(f"space {free - 1}\n"), NODE, "/data/w", files, {}, 5)
    assert "/data/w" in short and f"{free - 1:,} bytes free" in short
    # a file replaced gives its bytes back after its copy: the peak is one file
    assert room(Space(f"space {(100 << 20) + SPARE}\n"), NODE, "/data/w", files, {"a": ok(100 << 20)}, 5) is None
    assert "cannot tell" in room(Space("space -1\n\x1b[2J"), NODE, "/data/w", files, {}, 5)


# --------------------------------------------------------------------------- answers are parsed, never trusted

@pytest.mark.parametrize("parse, text", [
    (parse_part, "part 10 removed by hand"), (parse_part, "part 1\npart 2"), (parse_part, "part " + "1" * 300),
    (parse_sha, "sha " + "A" * 64), (parse_sha, "sha " + "a" * 63), (parse_space, "space 1e9"),
    (parse_source_head, "ok 9999"), (parse_source_head, "ok 644 extra"), (parse_source_head, "no reason"),
    (lambda t: parse_append(t, 5), "wrote -5"), (lambda t: parse_append(t, 5), "error no space"),
])
def test_junk_answers_are_refused(parse, text):
    with pytest.raises(ValueError):
        parse(text)


def test_known_answers():
    assert parse_part("part 7\n") == (7, None) and parse_part("part 0 removed link\n") == (0, "link")
    assert parse_source_head("ok 640") == 0o640 and parse_sha("a" * 64) == "a" * 64
    assert parse_append("wrote 5\n", 5) is None and "ENOSPC" in parse_append("error ENOSPC\n", 5)
    assert hashlib.sha256(b"").hexdigest() == parse_sha("sha " + hashlib.sha256(b"").hexdigest())
