#!/usr/bin/env bash
# Builds the docker-archive tars of the cluster's own images (pause, CoreDNS,
# local-path-provisioner and a busybox for its helper pods) from the binaries
# that e2e/cluster/install.sh cached. Called by install.sh; up.sh imports the
# tars into the cluster's containerd.
#
#   e2e/images/system-images.sh [--force]
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/lib.sh"

FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1
WRITER="$E2E_DIR/images/docker_archive.py"
BUSYBOX=/bin/busybox

for c in "pause-$PAUSE_VERSION" "coredns-$COREDNS_VERSION" "local-path-provisioner-$LOCAL_PATH_VERSION"; do
  [[ -f "$CACHE_DIR/$c/.built" ]] || die "$CACHE_DIR/$c is not built: run e2e/cluster/install.sh"
done
if ! "$BUSYBOX" --list >/dev/null 2>&1; then
  die "$BUSYBOX missing or broken (Debian package busybox-static)"
fi

fp=$( {
  printf '%s\n' "$PAUSE_IMAGE" "$COREDNS_IMAGE" "$LOCAL_PATH_IMAGE" "$BUSYBOX_IMAGE"
  cat "$CACHE_DIR/pause-$PAUSE_VERSION/.built" "$CACHE_DIR/coredns-$COREDNS_VERSION/.built" \
    "$CACHE_DIR/local-path-provisioner-$LOCAL_PATH_VERSION/.built" "$WRITER" "$0"
  sha256sum "$BUSYBOX"
} | sha256sum | cut -c1-16)

mkdir -p "$IMAGE_CACHE"
if [[ $FORCE -eq 0 && -f "$IMAGE_CACHE/.built" && "$(cat "$IMAGE_CACHE/.built")" == "$fp" ]] \
  && [[ -f "$IMAGE_CACHE/pause.tar" && -f "$IMAGE_CACHE/coredns.tar" \
     && -f "$IMAGE_CACHE/local-path-provisioner.tar" && -f "$IMAGE_CACHE/busybox.tar" ]]; then
  log "system images: cached in $IMAGE_CACHE"
  exit 0
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Base rootfs: /etc/passwd with root and nonroot (65532), /tmp.
base_rootfs() {
  local r=$1
  mkdir -p "$r/etc" "$r/tmp" "$r/home/nonroot"
  chmod 1777 "$r/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$r/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$r/etc/group"
  printf 'hosts: files dns\n' >"$r/etc/nsswitch.conf"
}

log "system images: building into $IMAGE_CACHE"

r="$WORK/pause"; mkdir -p "$r"
install -m 0755 "$CACHE_DIR/pause-$PAUSE_VERSION/bin/pause" "$r/pause"
python3 "$WRITER" build --rootfs "$r" --tag "$PAUSE_IMAGE" --out "$IMAGE_CACHE/pause.tar" \
  --entrypoint '["/pause"]' --user 65535:65535

r="$WORK/coredns"; base_rootfs "$r"
install -m 0755 "$CACHE_DIR/coredns-$COREDNS_VERSION/bin/coredns" "$r/coredns"
python3 "$WRITER" build --rootfs "$r" --tag "$COREDNS_IMAGE" --out "$IMAGE_CACHE/coredns.tar" \
  --entrypoint '["/coredns"]' --user 65532:65532 --expose 53/udp --expose 53/tcp --chown home/nonroot=65532:65532

r="$WORK/local-path"; base_rootfs "$r"
mkdir -p "$r/usr/bin"
install -m 0755 "$CACHE_DIR/local-path-provisioner-$LOCAL_PATH_VERSION/bin/local-path-provisioner" "$r/usr/bin/local-path-provisioner"
python3 "$WRITER" build --rootfs "$r" --tag "$LOCAL_PATH_IMAGE" --out "$IMAGE_CACHE/local-path-provisioner.tar" \
  --entrypoint '["local-path-provisioner"]'

# busybox: the local-path helper pods run `sh -c` scripts with mkdir/rm/chmod.
r="$WORK/busybox"; base_rootfs "$r"
mkdir -p "$r/bin"
install -m 0755 "$BUSYBOX" "$r/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [[ "$applet" == busybox ]] || ln -s busybox "$r/bin/$applet"
done
python3 "$WRITER" build --rootfs "$r" --tag "$BUSYBOX_IMAGE" --out "$IMAGE_CACHE/busybox.tar" --cmd '["sh"]'

printf '%s\n' "$fp" >"$IMAGE_CACHE/.built"
log "system images: done"
