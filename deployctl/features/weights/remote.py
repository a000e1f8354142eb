"""The fixed scripts `weights sync` runs on the nodes, their argument lists and what their answers may be.

Both sides run python3 (listing.PRELUDE: nothing below the weights directory is opened through a symbolic
link). The directory and the file name are arguments, validated first (``safe_dir``, ``safe_name``), never
spliced into a script; an answer is a short line of a fixed shape, parsed here (``parse_*``): anything else is
a ValueError about the node. The words a node may use for "why not" are the keys of ``WHY``.

The source (``SOURCE``, $1 the operation):
  cat DIR NAME LIMIT        the file's first LIMIT bytes (the index); a refusal on stderr, exit 3
  read DIR NAME SIZE OFF    "ok <mode>" then the bytes [OFF, SIZE); "no <why>" and exit 3 when the file is not
                            a regular file of SIZE bytes (opened without following a link)
  sha DIR NAME SIZE N       "ok <mode>", then the sha256 of its first N bytes

The destination (``DEST``); the part file ``<name>.deployctl-part`` is deployctl's only when it is a regular
file of the SSH user, mode 600, with one link (``trusted``): anything else found there is removed (the name
itself: unlink never follows a link) and the copy starts again, in a file created with O_CREAT|O_EXCL|
O_NOFOLLOW.
  space DIR                 "space <bytes>": what the file system of DIR (or of its nearest existing parent)
                            has free for a user that is not root
  part DIR NAME SIZE        "part <bytes>" (a part file deployctl may resume), "part 0 removed <why>", or
                            "no <why>" (a directory on the way is a link or a file; a directory as part file)
  partsha DIR NAME N        "sha <hex>" of the part file's first N bytes, or "no <why>"
  append DIR NAME OFF SIZE  "ready" once the part file is open (created when OFF is 0, else checked to be
                            deployctl's and OFF bytes long), then writes stdin to it up to SIZE bytes: "wrote
                            <n>"; stdin ending early: "short <n>", exit 5 (the part stays: interrupted);
                            a write error or more bytes than SIZE: the part file is removed, "error <why>"
  finish DIR NAME SIZE MODE the part file, checked again and SIZE bytes long, gets MODE (the source's mode,
                            masked by the node's umask), is synced and renamed over NAME: "moved"; else it is
                            removed: "no <why>" (a directory or link at NAME is not replaced: "no final")
  drop DIR NAME             removes the part file (whatever it is, never what a link points to): "dropped"
"""

from __future__ import annotations

import re

from deployctl.features.weights.listing import PRELUDE, safe_dir, safe_name

PART = ".deployctl-part"
ANSWER_BYTES = 200              # every answer is one short line (a sha256 is 64 characters)

SOURCE = PRELUDE + r"""
op, d, name = sys.argv[1][10:], sys.argv[2], sys.argv[3]
out = sys.stdout.buffer
try:
    f = open_below(d, name)
except (OSError, Refused) as e:
    if op == "cat":
        sys.stderr.write("deployctl-read: %s\n" % {"link": "a symbolic link, not followed",
                         "notfile": "not a regular file", "missing": "No such file or directory"}.get(
                         why(e), "cannot be read"))
    else:
        out.write(b"no %s\n" % why(e).encode())
    sys.exit(3)
st = os.fstat(f)
if op == "cat":
    left = int(sys.argv[4])
    while left > 0:
        b = os.read(f, min(CHUNK, left))
        if not b:
            break
        out.write(b)
        left -= len(b)
    sys.exit(0)
if st.st_size != int(sys.argv[4]):
    out.write(b"no size %d\n" % st.st_size)
    sys.exit(3)
out.write(b"ok %o\n" % stat.S_IMODE(st.st_mode))
if op == "sha":
    out.write(sha(f, int(sys.argv[5]))[0].encode() + b"\n")
    sys.exit(0)
left = st.st_size - int(sys.argv[5])
os.lseek(f, int(sys.argv[5]), 0)
while left > 0:
    b = os.read(f, min(CHUNK, left))
    if not b:
        break
    out.write(b)
    left -= len(b)
"""

DEST = PRELUDE + r"""
PART = ".deployctl-part"
op, d = sys.argv[1][10:], sys.argv[2]

def say(line, rc=None):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    if rc is not None:
        sys.exit(rc)

def trusted(st):
    k = kind(st)
    if k:
        return k
    if st.st_uid != os.geteuid():
        return "owner"
    if st.st_nlink != 1:
        return "links"
    return "mode" if stat.S_IMODE(st.st_mode) != 0o600 else None

def drop(fd, part):
    try:
        if not stat.S_ISDIR(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
            os.unlink(part, dir_fd=fd)
    except OSError:
        pass

if op == "space":
    p = d
    while not os.path.isdir(p) and p not in ("", "/"):
        p = os.path.dirname(p)
    s = os.statvfs(p or "/")
    say("space %d" % (s.f_bavail * s.f_frsize), 0)
name = sys.argv[3]
try:
    if op == "append":
        os.makedirs(d, 0o750, exist_ok=True)
    fd, last = below(d, name, make=op == "append")
except (OSError, Refused) as e:
    if why(e) == "missing" and op in ("part", "drop"):
        say("part 0" if op == "part" else "dropped", 0)
    say("no " + why(e), 3)
part = last + PART
if op == "drop":
    drop(fd, part)
    say("dropped")
elif op == "part":
    try:
        st = os.stat(part, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        say("part 0", 0)
    if stat.S_ISDIR(st.st_mode):
        say("no partdir", 3)
    bad = trusted(st) or ("longer" if st.st_size > int(sys.argv[4]) else None)
    if bad:
        try:
            os.unlink(part, dir_fd=fd)
        except OSError:
            say("no " + bad, 3)
        say("part 0 removed " + bad)
    else:
        say("part %d" % st.st_size)
elif op == "partsha":
    try:
        f = regular(fd, part)
        st = os.fstat(f)
        bad = trusted(st) or ("size" if st.st_size < int(sys.argv[4]) else None)
    except (OSError, Refused) as e:
        bad = why(e)
    if bad:
        say("no " + bad, 3)
    say("sha " + sha(f, int(sys.argv[4]))[0])
elif op == "append":
    off, size = int(sys.argv[4]), int(sys.argv[5])
    try:
        if off == 0:
            drop(fd, part)
            f = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
            os.fchmod(f, 0o600)
        else:
            f = regular(fd, part, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK)
            st = os.fstat(f)
            bad = trusted(st) or ("changed" if st.st_size != off else None)
            if bad:
                say("no " + bad, 3)
    except (OSError, Refused) as e:
        say("no " + why(e), 3)
    say("ready")
    left = size - off
    try:
        while left > 0:
            b = os.read(0, min(CHUNK, left))
            if not b:
                break
            left -= len(b)
            while b:
                b = b[os.write(f, b):]
        extra = os.read(0, 1) if left == 0 else b""
    except OSError as e:
        drop(fd, part)
        say("error " + errno.errorcode.get(e.errno, "EIO"), 4)
    if extra:
        drop(fd, part)
        say("error long", 4)
    if left:
        say("short %d" % (size - off - left), 5)
    say("wrote %d" % (size - off))
elif op == "finish":
    size, mode = int(sys.argv[4]), int(sys.argv[5], 8)
    try:
        f = regular(fd, part)
        st = os.fstat(f)
        bad = trusted(st) or ("size" if st.st_size != size else None)
        if not bad:
            try:
                bad = kind(os.stat(last, dir_fd=fd, follow_symlinks=False)) and "final"
            except FileNotFoundError:
                pass
    except (OSError, Refused) as e:
        bad = why(e)
    if bad:
        drop(fd, part)
        say("no " + bad, 3)
    umask = os.umask(0o077)
    os.umask(umask)
    try:
        os.fchmod(f, mode & 0o777 & ~umask)
        os.fsync(f)
        os.rename(part, last, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError as e:
        drop(fd, part)
        say("error " + errno.errorcode.get(e.errno, "EIO"), 4)
    say("moved")
"""

# what a node may say instead of a file, and how deployctl says it
WHY = {"missing": "missing", "link": "a symbolic link (not followed)", "notfile": "not a regular file",
       "unreadable": "unreadable", "owner": "not owned by the SSH user", "links": "a file with other (hard) links",
       "mode": "not mode 600 (deployctl makes its part files 600)", "longer": "longer than the source's file",
       "partdir": "a directory", "changed": "changed since it was looked at", "size": "not of the expected size",
       "final": "blocked: the file's own name is a link or not a regular file (not replaced)"}
_WHY = "|".join(WHY)
_PART_ANSWER = re.compile(rf"^part (\d{{1,16}})(?: removed ({_WHY}))?$")
_NO = re.compile(rf"^no ({_WHY})$")
_SOURCE_HEAD = re.compile(r"^(?:ok ([0-7]{1,6})|no (?:size (\d{1,16})|(" + _WHY + ")))$")
_SHA = re.compile(r"^(?:sha )?([0-9a-f]{64})$")
_SPACE = re.compile(r"^space (\d{1,20})$")
_APPEND = re.compile(rf"^(?:wrote (\d{{1,16}})|short (\d{{1,16}})|error ([A-Z0-9]{{1,16}}|long)|no ({_WHY}))$")
_FINISH = re.compile(rf"^(?:(moved)|error ([A-Z0-9]{{1,16}})|no ({_WHY}))$")


def source_argv(op: str, directory: str, name: str, *numbers: int) -> list[str]:
    return ["python3", "-c", SOURCE, f"deployctl-{op}", safe_dir(directory), safe_name(name),
            *[str(int(n)) for n in numbers]]


def dest_argv(op: str, directory: str, name: str | None = None, *args: int | str) -> list[str]:
    tail = [] if name is None else [safe_name(name), *[str(a) for a in args]]
    return ["python3", "-c", DEST, f"deployctl-{op}", safe_dir(directory), *tail]


def _line(text: str) -> str:
    if len(text) > ANSWER_BYTES:
        raise ValueError(f"answered {len(text):,} characters where one short line was expected")
    return text.strip()


def _refusal(line: str) -> ValueError:
    """A node's refusal (its WHY text) or, for anything else it answered, the answer shown."""
    m = _NO.match(line)
    return ValueError(WHY[m.group(1)] if m else f"answered {_show(line)}")


def parse_part(text: str) -> tuple[int, str | None]:
    """(bytes of the part file to resume from, why a part file found there was removed); ValueError for a
    refusal (its WHY text) or junk."""
    line = _line(text)
    m = _PART_ANSWER.match(line)
    if m:
        return int(m.group(1)), m.group(2)
    raise _refusal(line)


def parse_source_head(text: str) -> int:
    """The source file's mode from the first line a source answers; ValueError saying why it refused."""
    m = _SOURCE_HEAD.match(_line(text))
    if m is None:
        raise ValueError(f"answered {_show(text)}")
    if m.group(1):
        return int(m.group(1), 8) & 0o7777
    if m.group(2):
        raise ValueError(f"now {int(m.group(2)):,} bytes, not the size it was listed with: it changed")
    raise ValueError(WHY[m.group(3)])


def parse_sha(text: str) -> str:
    line = _line(text)
    m = _SHA.match(line)
    if m:
        return m.group(1)
    raise _refusal(line)


def parse_space(text: str) -> int:
    m = _SPACE.match(_line(text))
    if m is None:
        raise ValueError(f"answered {_show(text)} about its free space")
    return int(m.group(1))


def parse_append(text: str, want: int) -> str | None:
    """None when the node wrote ``want`` bytes; else what went wrong (ValueError for junk)."""
    m = _APPEND.match(_line(text))
    if m is None:
        raise ValueError(f"answered {_show(text)}")
    wrote, short, error, no = m.groups()
    if wrote is not None:
        return None if int(wrote) == want else f"wrote {int(wrote):,} of {want:,} bytes"
    if short is not None:
        return f"its input ended after {int(short):,} of {want:,} bytes"
    if error is not None:
        return "more bytes came than the file has" if error == "long" else f"writing failed: {error}"
    return WHY[no]


def parse_finish(text: str) -> str | None:
    """None when the node moved the part file into place; else why not (ValueError for junk)."""
    m = _FINISH.match(_line(text))
    if m is None:
        raise ValueError(f"answered {_show(text)}")
    moved, error, no = m.groups()
    return None if moved else (f"failed: {error}" if error else WHY[no])


def _show(text: str) -> str:
    return repr(text.strip()[:80])
