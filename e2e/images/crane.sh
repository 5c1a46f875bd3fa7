# shellcheck shell=bash
# Image building with go-containerregistry's `crane`, offline. Sourced (after
# e2e/cluster/lib.sh) by build.sh and system-images.sh, never run.
#
# crane edits an image's config (entrypoint, user, env, ports, labels) only on
# an image it can pull, so the build goes through crane's own registry, served
# in memory on a loopback port for the duration of the calling script:
#
#   rootfs dir --tar--> layer.tar --crane append--> 127.0.0.1:<port>/<name>:build
#     --crane mutate -o--> docker-archive tar tagged with the final ref
#
# The archive is what `ctr images import` reads (see import_images in lib.sh).
# Nothing leaves the machine: the only registry involved is the local one.

CRANE=""
CRANE_REGISTRY=""
CRANE_PID=""
CRANE_WORK=""

# crane_start: starts the throw-away registry and sets CRANE_REGISTRY=127.0.0.1:<port>.
# The caller's EXIT trap must call crane_stop.
crane_start() {
  CRANE=$(bin crane) || true
  [[ -n "$CRANE" ]] || die "crane missing from $BIN_DIR: run e2e/cluster/install.sh (make deps)"
  CRANE_WORK=$(mktemp -d)
  "$CRANE" registry serve --address 127.0.0.1:0 2>"$CRANE_WORK/registry.log" &
  CRANE_PID=$!
  local port="" i
  for ((i = 0; i < 100; i++)); do
    # The background job opens registry.log itself, so the first reads may find no file yet:
    # not an error (under the callers' `set -e` a failed sed here ended the build silently).
    port=$(sed -n 's/.*serving on port \([0-9][0-9]*\).*/\1/p' "$CRANE_WORK/registry.log" 2>/dev/null || true)
    [[ -n "$port" ]] && break
    pid_alive "$CRANE_PID" || break
    sleep 0.1
  done
  [[ -n "$port" ]] || die "crane registry serve did not start: $(cat "$CRANE_WORK/registry.log" 2>/dev/null)"
  CRANE_REGISTRY="127.0.0.1:$port"
}

crane_stop() {
  if [[ -n "$CRANE_PID" ]]; then
    kill "$CRANE_PID" 2>/dev/null || true
    wait "$CRANE_PID" 2>/dev/null || true
    CRANE_PID=""
  fi
  [[ -n "$CRANE_WORK" ]] && rm -rf "$CRANE_WORK"
  CRANE_WORK=""
}

# rootfs_layer ROOTFS OUT.tar [PATH=UID:GID ...]: the rootfs as one reproducible
# layer: entries sorted, owned by 0:0 (or by the given ids), mtime
# $SOURCE_DATE_EPOCH (default 0), no entry for the root directory itself.
rootfs_layer() {
  local root=$1 out=$2; shift 2
  local common=(--format=gnu --sort=name --numeric-owner "--mtime=@${SOURCE_DATE_EPOCH:-0}")
  local excludes=() spec
  for spec in "$@"; do excludes+=(--anchored "--exclude=${spec%%=*}"); done
  local top=()
  mapfile -t top < <(cd "$root" && find . -mindepth 1 -maxdepth 1 -printf '%P\n' | LC_ALL=C sort)
  [[ ${#top[@]} -gt 0 ]] || die "rootfs $root is empty"
  tar -C "$root" -cf "$out" "${common[@]}" --owner=0 --group=0 "${excludes[@]}" -- "${top[@]}"
  local path ids
  for spec in "$@"; do
    path=${spec%%=*}; ids=${spec#*=}
    tar -C "$root" -rf "$out" "${common[@]}" "--owner=${ids%%:*}" "--group=${ids#*:}" -- "$path"
  done
}

# image_platform: linux/<GOARCH of this machine>.
image_platform() {
  case "$(uname -m)" in
    x86_64) echo linux/amd64 ;;
    aarch64) echo linux/arm64 ;;
    *) echo "linux/$(uname -m)" ;;
  esac
}

# crane_image ROOTFS REF OUT.tar [--chown PATH=UID:GID ...] [crane mutate flags ...]
# Builds a one-layer OCI image of ROOTFS with the config the mutate flags set
# (--entrypoint, --cmd, -u, -w, -e, --exposed-ports, -l) and writes it to OUT.tar
# as a docker-archive tagged REF. PATH is always set in the image's env.
crane_image() {
  local root=$1 ref=$2 out=$3; shift 3
  [[ -n "$CRANE_REGISTRY" ]] || die "crane_image: crane_start was not called"
  local owners=() mutate=()
  while [[ $# -gt 0 ]]; do
    if [[ "$1" == --chown ]]; then owners+=("$2"); shift 2; else mutate+=("$1"); shift; fi
  done
  local name; name=$(basename "$out" .tar)
  local layer="$CRANE_WORK/$name-layer.tar" staging="$CRANE_REGISTRY/$name:build"
  rootfs_layer "$root" "$layer" "${owners[@]}"
  mkdir -p "$(dirname "$out")"
  "$CRANE" --insecure append --oci-empty-base -f "$layer" -t "$staging" 2>>"$CRANE_WORK/crane.log" >/dev/null \
    || die "crane append $name failed: $(tail -n 5 "$CRANE_WORK/crane.log")"
  "$CRANE" --insecure mutate "$staging" --set-platform "$(image_platform)" \
    -e PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "${mutate[@]}" -t "$ref" -o "$out.tmp" 2>>"$CRANE_WORK/crane.log" \
    || die "crane mutate $name failed: $(tail -n 5 "$CRANE_WORK/crane.log")"
  mv "$out.tmp" "$out"
  rm -f "$layer"
  log "image $ref: $out ($(du -m "$out" | cut -f1) MiB)"
}
