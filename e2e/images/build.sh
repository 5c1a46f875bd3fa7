#!/usr/bin/env bash
# Docker-less build of the Starling images, as the e2e suite and `make demo` use them.
#
#   e2e/images/build.sh [--no-import]
#
# 1. cargo build of starling-broker, starling-cli and starling-operator in the profile
#    $STARLING_CARGO_PROFILE (default `release`; `make test` and `make demo` use `ci`, see Cargo.toml);
# 2. for each image, a rootfs with its binaries (the broker image also holds the `starling` CLI,
#    which the chart's `helm test` pod runs), the glibc libraries `ldd` lists,
#    /etc/passwd with uid 65532 `nonroot` and CA certificates;
# 3. images built with crane (e2e/images/crane.sh), written as docker-archive tars
#    under <cargo target dir>/images/, tagged
#    starling/broker:<crate version>-<git short sha> and starling/operator:<same>;
# 4. imports them into the local cluster's containerd when it is up (unless --no-import);
# 5. writes the refs to $STARLING_E2E_DIR/images.env (and next to the tars) as
#    BROKER_IMAGE=... / OPERATOR_IMAGE=... and prints them.
#
# While the operator crate does not build, the broker image is built alone and
# OPERATOR_IMAGE is left empty; STARLING_REQUIRE_OPERATOR=1 makes that an error.
# The images are the docker-less equivalent of broker/Dockerfile and operator/Dockerfile.
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/lib.sh"
source "$E2E_DIR/images/crane.sh"

IMPORT=1
for arg in "$@"; do
  case "$arg" in
    --no-import) IMPORT=0 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) die "unknown argument: $arg" ;;
  esac
done

cd "$REPO_ROOT"
command -v cargo >/dev/null || die "cargo not found"
[[ -n "$(bin crane)" ]] || die "crane missing from $BIN_DIR: run e2e/cluster/install.sh (make deps)"

META=$(cargo metadata --no-deps --format-version 1) || die "cargo metadata failed"
read -r VERSION TARGET_DIR < <(python3 -c '
import json, sys
m = json.load(sys.stdin)
v = next(p["version"] for p in m["packages"] if p["name"] == "starling-broker")
print(v, m["target_directory"])' <<<"$META")
# Read once: the tag and the revision label name the same commit even when HEAD
# moves during the build.
REVISION=$(git rev-parse HEAD 2>/dev/null) || die "not a git checkout: the image tag needs the commit"
SHA=$(git rev-parse --short "$REVISION")
TAG="$VERSION-$SHA"
OUT="$TARGET_DIR/images"
mkdir -p "$OUT"

PROFILE=${STARLING_CARGO_PROFILE:-release}
# cargo's output directory of a profile: `dev` builds into debug/, every other profile into its name.
PROFILE_DIR=$([[ "$PROFILE" == dev ]] && echo debug || echo "$PROFILE")
# STARLING_IMAGES_PREBUILT=1 (e2e/setup.sh, after its build): the binaries are there, no
# cargo invocation here (`-p starling-broker` alone unifies features differently from the
# caller's build and would compile the workspace again).
PREBUILT=${STARLING_IMAGES_PREBUILT:-0}
if [[ "$PREBUILT" == 1 ]]; then
  log "binaries already built (STARLING_IMAGES_PREBUILT=1): $TARGET_DIR/$PROFILE_DIR"
else
  log "cargo build --profile $PROFILE -p starling-broker -p starling-cli"
  cargo build --profile "$PROFILE" -p starling-broker -p starling-cli || die "building starling-broker or starling-cli failed"
fi

BUILD_OPERATOR=1
if [[ "${STARLING_SKIP_OPERATOR:-0}" == 1 ]]; then
  BUILD_OPERATOR=0
  log "operator: skipped (STARLING_SKIP_OPERATOR=1)"
elif [[ "$PREBUILT" == 1 ]]; then
  [[ -x "$TARGET_DIR/$PROFILE_DIR/starling-operator" ]] || die "STARLING_IMAGES_PREBUILT=1 but $TARGET_DIR/$PROFILE_DIR/starling-operator is missing"
else
  log "cargo build --profile $PROFILE -p starling-operator"
  if ! cargo build --profile "$PROFILE" -p starling-operator; then
    if [[ "${STARLING_REQUIRE_OPERATOR:-0}" == 1 ]]; then
      die "building starling-operator failed"
    fi
    log "WARNING: starling-operator does not build yet; building the broker image only"
    BUILD_OPERATOR=0
  fi
fi

# make_image NAME BINARY REF EXPOSE...; the binaries in $IMAGE_EXTRA_BINARIES (paths) go into
# /usr/local/bin too, under their own names.
make_image() {
  local name=$1 binary=$2 ref=$3; shift 3
  local root lib extra
  [[ -x "$binary" ]] || die "$binary missing after the build"
  root=$(mktemp -d)
  mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot"
  chmod 1777 "$root/tmp"
  install -m 0755 "$binary" "$root/usr/local/bin/$name"
  for extra in ${IMAGE_EXTRA_BINARIES:-}; do
    [[ -x "$extra" ]] || die "$extra missing after the build"
    install -m 0755 "$extra" "$root/usr/local/bin/$(basename "$extra")"
  done
  # The dynamic loader and every library ldd resolves, at the same paths.
  # shellcheck disable=SC2086 # a list of paths
  if ldd "$binary" ${IMAGE_EXTRA_BINARIES:-} >/dev/null 2>&1; then
    while read -r lib; do
      [[ -n "$lib" ]] || continue
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    # (With several files ldd heads each one's list with a `FILE:` line: not a library.)
    done < <(ldd "$binary" ${IMAGE_EXTRA_BINARIES:-} | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u)
  fi
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  else
    log "warning: /etc/ssl/certs/ca-certificates.crt missing; image has no CA certificates"
  fi
  local expose=() p
  for p in "$@"; do expose+=(--exposed-ports "$p"); done
  crane_image "$root" "$ref" "$OUT/$name.tar" \
    --entrypoint "/usr/local/bin/$name" -u 65532:65532 -w /home/nonroot \
    -e SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --chown home/nonroot=65532:65532 \
    -l "org.opencontainers.image.title=$name" \
    -l "org.opencontainers.image.version=$VERSION" \
    -l "org.opencontainers.image.revision=$REVISION" \
    "${expose[@]}"
  rm -rf "$root"
}

trap crane_stop EXIT
crane_start

BROKER_IMAGE="starling/broker:$TAG"
OPERATOR_IMAGE=""
# The broker image holds the `starling` CLI too: the chart's `helm test` pod runs `starling check`.
IMAGE_EXTRA_BINARIES="$TARGET_DIR/$PROFILE_DIR/starling" \
  make_image starling-broker "$TARGET_DIR/$PROFILE_DIR/starling-broker" "$BROKER_IMAGE" 7400/udp 9400/tcp
TARS=("$OUT/starling-broker.tar")
if [[ $BUILD_OPERATOR -eq 1 ]]; then
  OPERATOR_IMAGE="starling/operator:$TAG"
  make_image starling-operator "$TARGET_DIR/$PROFILE_DIR/starling-operator" "$OPERATOR_IMAGE" 8080/tcp
  TARS+=("$OUT/starling-operator.tar")
else
  rm -f "$OUT/starling-operator.tar"
fi

ENV_TEXT="BROKER_IMAGE=$BROKER_IMAGE
OPERATOR_IMAGE=$OPERATOR_IMAGE"
printf '%s\n' "$ENV_TEXT" >"$OUT/images.env"

SOCK="$STATE_DIR/containerd/containerd.sock"
if [[ $IMPORT -eq 1 ]]; then
  if [[ -S "$SOCK" ]] && ctr -a "$SOCK" version >/dev/null 2>&1; then
    import_images "$SOCK" "${TARS[@]}"
    log "imported into the local cluster ($SOCK)"
  else
    log "local cluster not running ($SOCK): images not imported; run e2e/cluster/up.sh, then this script again"
  fi
fi
mkdir -p "$STATE_DIR"
printf '%s\n' "$ENV_TEXT" >"$STATE_DIR/images.env"

log "images written to $OUT; refs in $STATE_DIR/images.env"
printf '%s\n' "$ENV_TEXT"
