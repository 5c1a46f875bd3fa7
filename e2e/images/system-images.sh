#!/usr/bin/env bash
# Builds the images of the cluster's own pods (pause, CoreDNS,
# local-path-provisioner and a busybox for its helper pods) with crane, from the
# binaries that e2e/cluster/install.sh cached, as docker-archive tars under
# $IMAGE_CACHE. Called by install.sh; up.sh imports the tars into the cluster's
# containerd.
#
#   e2e/images/system-images.sh [--force]
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/lib.sh"
source "$E2E_DIR/images/crane.sh"

FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1
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
    "$CACHE_DIR/local-path-provisioner-$LOCAL_PATH_VERSION/.built" "$E2E_DIR/images/crane.sh" "$0"
  printf '%s\n' "$CRANE_VERSION"
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
trap 'crane_stop; rm -rf "$WORK"' EXIT
crane_start

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
crane_image "$r" "$PAUSE_IMAGE" "$IMAGE_CACHE/pause.tar" --entrypoint /pause -u 65535:65535

r="$WORK/coredns"; base_rootfs "$r"
install -m 0755 "$CACHE_DIR/coredns-$COREDNS_VERSION/bin/coredns" "$r/coredns"
crane_image "$r" "$COREDNS_IMAGE" "$IMAGE_CACHE/coredns.tar" --entrypoint /coredns -u 65532:65532 \
  --exposed-ports 53/udp --exposed-ports 53/tcp --chown home/nonroot=65532:65532

r="$WORK/local-path"; base_rootfs "$r"
mkdir -p "$r/usr/bin"
install -m 0755 "$CACHE_DIR/local-path-provisioner-$LOCAL_PATH_VERSION/bin/local-path-provisioner" "$r/usr/bin/local-path-provisioner"
crane_image "$r" "$LOCAL_PATH_IMAGE" "$IMAGE_CACHE/local-path-provisioner.tar" \
  --entrypoint local-path-provisioner

# busybox: the local-path helper pods run `sh -c` scripts with mkdir/rm/chmod.
r="$WORK/busybox"; base_rootfs "$r"
mkdir -p "$r/bin"
install -m 0755 "$BUSYBOX" "$r/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [[ "$applet" == busybox ]] || ln -s busybox "$r/bin/$applet"
done
crane_image "$r" "$BUSYBOX_IMAGE" "$IMAGE_CACHE/busybox.tar" --cmd sh

printf '%s\n' "$fp" >"$IMAGE_CACHE/.built"
log "system images: done"
