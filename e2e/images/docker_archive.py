#!/usr/bin/env python3
"""Docker-less image build: turn a rootfs directory into a docker-archive tar.

The archive is what `docker save` writes and what `ctr images import` reads:

    manifest.json              [{"Config": "<sha>.json", "RepoTags": [...], "Layers": [...]}]
    <sha>.json                 image config (rootfs.diff_ids, Entrypoint, Env, User, ...)
    <diff_id>/layer.tar        one uncompressed layer holding the whole rootfs

Layers are reproducible: entries are sorted, owned by 0:0 (unless --chown says
otherwise) and stamped with a fixed mtime, so the same rootfs gives the same
image ID.

Usage:
    docker_archive.py build --rootfs DIR --tag REF [--tag REF ...] --out FILE.tar
        [--entrypoint JSON] [--cmd JSON] [--env K=V ...] [--user UID:GID]
        [--workdir DIR] [--expose PORT/PROTO ...] [--label K=V ...]
        [--chown PATH=UID:GID ...]
    docker_archive.py import --address SOCKET FILE.tar [FILE.tar ...]

Only the Python standard library is used.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile

EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
CREATED = "1970-01-01T00:00:00Z" if EPOCH == 0 else None


def _created() -> str:
    if CREATED is not None:
        return CREATED
    import datetime

    return datetime.datetime.fromtimestamp(EPOCH, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def _parse_owner(spec: str) -> tuple[str, int, int]:
    path, _, ids = spec.rpartition("=")
    uid, _, gid = ids.partition(":")
    if not path or not uid.isdigit() or not gid.isdigit():
        raise SystemExit(f"bad --chown {spec!r}: want PATH=UID:GID")
    return path.strip("/"), int(uid), int(gid)


def write_layer(rootfs: str, out, owners: dict[str, tuple[int, int]]) -> None:
    """Write rootfs as a tar to the binary file `out`, deterministically."""
    entries: list[str] = []
    for dirpath, dirnames, filenames in os.walk(rootfs):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, rootfs)
        for name in sorted(dirnames + filenames):
            rel = name if rel_dir == "." else os.path.join(rel_dir, name)
            entries.append(rel)
        # os.walk does not descend into symlinked dirs; they are listed as entries above.
    entries.sort()
    seen_inodes: dict[tuple[int, int], str] = {}
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in entries:
            full = os.path.join(rootfs, rel)
            st = os.lstat(full)
            info = tarfile.TarInfo(rel)
            info.mode = stat.S_IMODE(st.st_mode)
            info.mtime = EPOCH
            info.uid, info.gid = owners.get(rel, (0, 0))
            info.uname = info.gname = ""
            if stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(full)
                tar.addfile(info)
            elif stat.S_ISREG(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if st.st_nlink > 1 and key in seen_inodes:
                    info.type = tarfile.LNKTYPE
                    info.linkname = seen_inodes[key]
                    tar.addfile(info)
                    continue
                seen_inodes[key] = rel
                info.size = st.st_size
                with open(full, "rb") as f:
                    tar.addfile(info, f)
            else:
                print(f"docker_archive: skipping special file {rel}", file=sys.stderr)


class _HashingWriter(io.RawIOBase):
    """Write-through file that hashes what passes and knows its position."""

    def __init__(self, f):
        self.f = f
        self.h = hashlib.sha256()
        self.pos = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def write(self, b) -> int:
        self.h.update(b)
        self.pos += len(b)
        return self.f.write(b)


def build(args: argparse.Namespace) -> None:
    rootfs = os.path.abspath(args.rootfs)
    if not os.path.isdir(rootfs):
        raise SystemExit(f"rootfs {rootfs} is not a directory")
    owners = {p: (u, g) for p, u, g in map(_parse_owner, args.chown or [])}

    with tempfile.TemporaryDirectory(prefix="docker-archive-") as tmp:
        layer_path = os.path.join(tmp, "layer.tar")
        with open(layer_path, "wb") as raw:
            hw = _HashingWriter(raw)
            write_layer(rootfs, hw, owners)
        diff_id = "sha256:" + hw.h.hexdigest()

        container_config: dict = {}
        if args.entrypoint:
            container_config["Entrypoint"] = json.loads(args.entrypoint)
        if args.cmd:
            container_config["Cmd"] = json.loads(args.cmd)
        env = args.env or []
        if not any(e.startswith("PATH=") for e in env):
            env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] + env
        container_config["Env"] = env
        if args.user:
            container_config["User"] = args.user
        container_config["WorkingDir"] = args.workdir or "/"
        if args.expose:
            container_config["ExposedPorts"] = {p: {} for p in args.expose}
        if args.label:
            container_config["Labels"] = dict(kv.split("=", 1) for kv in args.label)

        config = {
            "architecture": args.arch,
            "os": "linux",
            "created": _created(),
            "config": container_config,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [
                {"created": _created(), "created_by": "e2e/images/docker_archive.py"}
            ],
        }
        config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
        config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
        layer_name = diff_id.split(":", 1)[1] + "/layer.tar"
        manifest = [{"Config": config_name, "RepoTags": args.tag, "Layers": [layer_name]}]
        manifest_bytes = json.dumps(manifest, separators=(",", ":")).encode()

        out = os.path.abspath(args.out)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp_out = out + ".tmp"
        with tarfile.open(tmp_out, mode="w", format=tarfile.PAX_FORMAT) as tar:

            def add_bytes(name: str, data: bytes) -> None:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = EPOCH
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))

            d = tarfile.TarInfo(layer_name.split("/")[0])
            d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, EPOCH
            tar.addfile(d)
            info = tarfile.TarInfo(layer_name)
            info.size = os.path.getsize(layer_path)
            info.mtime, info.mode = EPOCH, 0o644
            with open(layer_path, "rb") as f:
                tar.addfile(info, f)
            add_bytes(config_name, config_bytes)
            add_bytes("manifest.json", manifest_bytes)
        os.replace(tmp_out, out)
    size_mib = os.path.getsize(out) / (1 << 20)
    print(
        f"docker_archive: wrote {out} ({size_mib:.1f} MiB) "
        f"id=sha256:{config_name[:-5][:12]} tags={','.join(args.tag)}",
        file=sys.stderr,
    )


def import_(args: argparse.Namespace) -> None:
    ctr = shutil.which("ctr")
    if ctr is None:
        raise SystemExit("ctr not found (install containerd: e2e/cluster/install.sh)")
    for path in args.files:
        cmd = [ctr, "-a", args.address, "-n", args.namespace, "images", "import", path]
        print("docker_archive: " + " ".join(cmd), file=sys.stderr)
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            sys.stderr.write(res.stdout + res.stderr)
            raise SystemExit(f"import of {path} failed (exit {res.returncode})")


def _default_arch() -> str:
    machine = os.uname().machine
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="write a docker-archive tar from a rootfs dir")
    b.add_argument("--rootfs", required=True)
    b.add_argument("--tag", action="append", required=True, help="repo:tag (repeatable)")
    b.add_argument("--out", required=True)
    b.add_argument("--entrypoint", help='JSON list, e.g. ["/app"]')
    b.add_argument("--cmd", help="JSON list")
    b.add_argument("--env", action="append", help="K=V (repeatable)")
    b.add_argument("--user", help="UID:GID or name")
    b.add_argument("--workdir")
    b.add_argument("--expose", action="append", help="PORT/PROTO (repeatable)")
    b.add_argument("--label", action="append", help="K=V (repeatable)")
    b.add_argument("--chown", action="append", help="PATH=UID:GID inside the rootfs (repeatable)")
    b.add_argument("--arch", default=_default_arch())
    b.set_defaults(func=build)

    i = sub.add_parser("import", help="import archives into containerd's k8s.io namespace")
    i.add_argument("--address", required=True, help="containerd socket")
    i.add_argument("--namespace", default="k8s.io")
    i.add_argument("files", nargs="+")
    i.set_defaults(func=import_)

    args = p.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main(sys.argv[1:])
