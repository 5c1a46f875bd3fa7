#!/usr/bin/env python3
"""Gives a clean clone's unchanged files the modification times of the clone built before it.

Cargo judges a workspace crate stale when one of its source files is newer than its last
compile, and a clone stamps every file with the time of the clone: CI, which clones afresh at
the same path and keeps that path's build directory (scripts/build-cache.sh), recompiled every
workspace crate on every run (512 s of a 1245 s `make test` at 483d64a), whatever the commit
changed.

    scripts/source-mtimes.py rewind BUILD_DIR   before a run's first cargo command
    scripts/source-mtimes.py seal BUILD_DIR     after its last one

BUILD_DIR/starling-source-mtimes.tsv (the DB; it goes wherever the build directory goes, and
a seeded copy starts without one) maps each file git tracks to the SHA-256 of its content and
the modification time it had when that content was first seen. `rewind`, for each tracked
file of the working tree:
  - content equal to the DB's: the file gets the DB's time back (older than every compile
    that read that content, so cargo keeps those compiles);
  - content new or changed: the file keeps its own time (newer than every compile) and the DB
    records it.
The DB then holds exactly the working tree's files, written whole under a temporary name and
renamed into place. `seal` stamps the DB with the time the run's compiles ended.

Why this is safe: a file's time only moves back to when its current content was first seen
by a run that built into the same directory from that content. A compile that did not come
from such a run (an edit compiled by hand into the directory, then reverted) would break
that, so `rewind` trusts the DB only when no fingerprint in the build directory is newer than
the DB's seal; otherwise it gives no time back and only records (one full workspace compile,
never a stale one). scripts/test.sh runs it only for the per-path build directories it owns.

Why hand-written: the published tools for this (mtime-travel, cargo-mtime, mtime-rewind) are
small single-author crates that a clean machine would have to compile before its first build;
this is the same few lines of hashing and utime, with the rule above spelled out.
"""

import hashlib
import os
import subprocess
import sys


def tracked_files():
    """Every regular file git tracks in the working tree, relative to the repository root."""
    out = subprocess.run(["git", "ls-files", "-z"], check=True, capture_output=True).stdout
    for raw in out.split(b"\0"):
        if not raw:
            continue
        path = os.fsdecode(raw)
        if os.path.isfile(path) and not os.path.islink(path):
            yield path


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load(db):
    """DB as {path: (sha256, mtime_ns)}; a missing or unreadable DB is empty."""
    known = {}
    try:
        with open(db, encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 3 and parts[2].isdigit():
                    known[parts[0]] = (parts[1], int(parts[2]))
    except OSError:
        pass
    return known


def compiled_since(build_dir, stamp_ns):
    """Whether any fingerprint under BUILD_DIR/<profile>/.fingerprint is newer than STAMP_NS:
    a compile the DB did not see."""
    for profile in os.scandir(build_dir):
        fp = os.path.join(profile.path, ".fingerprint")
        if not profile.is_dir() or not os.path.isdir(fp):
            continue
        for unit in os.scandir(fp):
            if unit.stat().st_mtime_ns > stamp_ns:
                return True
            if unit.is_dir():
                for f in os.scandir(unit.path):
                    if f.stat().st_mtime_ns > stamp_ns:
                        return True
    return False


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("rewind", "seal"):
        print("usage: scripts/source-mtimes.py rewind|seal BUILD_DIR", file=sys.stderr)
        return 2
    build_dir = os.path.abspath(sys.argv[2])
    db = os.path.join(build_dir, "starling-source-mtimes.tsv")
    if sys.argv[1] == "seal":
        if os.path.exists(db):
            os.utime(db)
        return 0
    trusted = False
    try:
        trusted = not compiled_since(build_dir, os.stat(db).st_mtime_ns)
    except OSError:
        pass
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                          capture_output=True, text=True).stdout.strip()
    os.chdir(root)
    known = load(db) if trusted else {}
    seen = {}
    rewound = changed = 0
    for path in tracked_files():
        sha = digest(path)
        st = os.stat(path)
        old = known.get(path)
        if old is not None and old[0] == sha:
            if st.st_mtime_ns != old[1]:
                os.utime(path, ns=(st.st_atime_ns, old[1]))
                rewound += 1
            seen[path] = old
        else:
            seen[path] = (sha, st.st_mtime_ns)
            changed += 1
    tmp = f"{db}.tmp-{os.getpid()}"
    os.makedirs(build_dir, exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        for path in sorted(seen):
            sha, ns = seen[path]
            f.write(f"{path}\t{sha}\t{ns}\n")
    os.replace(tmp, db)
    print(f"source-mtimes: {len(seen)} files, {rewound} given back their earlier time, "
          f"{changed} new or changed"
          + ("" if trusted else " (no trusted record: compiled since, or never sealed)"),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
