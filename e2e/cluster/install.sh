#!/usr/bin/env bash
# Installs and builds everything the local e2e cluster needs. Idempotent: a
# second run checks version markers and returns in seconds.
#
#   e2e/cluster/install.sh            install what is missing
#   e2e/cluster/install.sh --force    rebuild every cached binary
#   e2e/cluster/install.sh --tidy     re-run `go mod tidy` in the wrapper modules first
#
# Debian packages go through apt; Kubernetes, etcd, CoreDNS, local-path-provisioner,
# helm and crane are built from the Go module proxy; outputs are cached by version under
# $STARLING_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/starling).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FORCE=0
TIDY=0
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    --tidy) TIDY=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) die "unknown argument: $arg" ;;
  esac
done

need_root
mkdir -p "$CACHE_DIR/logs" "$BIN_DIR" "$IMAGE_CACHE"
GO_DIR="$E2E_CLUSTER_DIR/go"
STEP=""
STEP_LOG=""
START=$SECONDS

on_exit() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    printf '\ninstall.sh: FAILED at step: %s (exit %d)\n' "${STEP:-startup}" "$rc" >&2
    if [[ -n "$STEP_LOG" && -s "$STEP_LOG" ]]; then
      printf -- '--- last lines of %s ---\n' "$STEP_LOG" >&2
      tail -n 40 "$STEP_LOG" >&2
      printf -- '--- end ---\n' >&2
    fi
  fi
}
trap on_exit EXIT

# run_step NAME DIR CMD...: runs CMD in DIR with its output in a per-step log file, and logs its
# wall time and CPU time (user+sys of CMD and its children, from getrusage via /usr/bin/time when
# present): on a shared machine the wall time says little, the CPU time is what a step costs.
# Each finished step also adds a line to $STEPS_LOG (deps-steps.log), so the costs of every
# first-time build on a machine stay on record.
STEPS_LOG="$CACHE_DIR/logs/deps-steps.log"
run_step() {
  STEP=$1; local dir=$2; shift 2
  STEP_LOG="$CACHE_DIR/logs/$STEP.log"
  local t0=$SECONDS rusage="$CACHE_DIR/logs/.$STEP.rusage" cpu=""
  log "$STEP: running (log: $STEP_LOG)"
  if [[ -x /usr/bin/time ]]; then
    (cd "$dir" && /usr/bin/time -f '%U %S' -o "$rusage" "$@") >"$STEP_LOG" 2>&1
    local user sys
    read -r user sys <"$rusage" && cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.0f", u + s }')
    rm -f "$rusage"
  else
    (cd "$dir" && "$@") >"$STEP_LOG" 2>&1
  fi
  local wall=$((SECONDS - t0))
  log "$STEP: done in ${wall}s${cpu:+, ${cpu} CPU s}"
  printf '%s %-36s wall %5ds  cpu %5ss  load %s\n' "$(date -u +%FT%TZ)" "$STEP" "$wall" "${cpu:-?}" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$STEPS_LOG"
  STEP_LOG=""
}

fingerprint() { # fingerprint VERSION FILES... -> short hash of the build inputs
  local v=$1; shift
  {
    printf '%s\n' "$v"
    if [[ $# -gt 0 ]]; then cat "$@"; fi
  } | sha256sum | cut -c1-16
}

# up_to_date DIR FINGERPRINT BINARIES...: every binary present and marker matches.
up_to_date() {
  local dir=$1 fp=$2; shift 2
  [[ $FORCE -eq 0 && -f "$dir/.built" && "$(cat "$dir/.built")" == "$fp" ]] || return 1
  local b
  for b in "$@"; do [[ -x "$dir/bin/$b" ]] || return 1; done
}

mark_built() { printf '%s\n' "$2" >"$1/.built"; }

link_bins() { # link_bins DIR BINARIES...
  local dir=$1 b; shift
  for b in "$@"; do ln -sfn "$dir/bin/$b" "$BIN_DIR/$b"; done
}

# --- 1. Debian packages --------------------------------------------------------
STEP=packages
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  log "packages: installing ${missing[*]}"
  run_step apt-update / apt-get update
  run_step apt-install / env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
  log "packages: all ${#DEB_PACKAGES[@]} present"
fi
STEP=tools
for t in containerd ctr runc iptables python3 gcc openssl prometheus promtool; do
  command -v "$t" >/dev/null || die "$t not found on PATH after installing packages"
done
[[ -x /usr/lib/cni/bridge ]] || die "CNI plugins missing from /usr/lib/cni (containernetworking-plugins)"

# --- 2. Go ---------------------------------------------------------------------
STEP=go
command -v go >/dev/null || die "go is not on PATH; Go >= 1.24 is needed to build the cluster binaries"
GOV=$(go env GOVERSION)
GOV_NUM=${GOV#go}
IFS=. read -r gmaj gmin _ <<<"$GOV_NUM"
if [[ "$gmaj" -lt 1 || ( "$gmaj" -eq 1 && "${gmin%%[!0-9]*}" -lt 24 ) ]]; then
  die "Go $GOV is too old; Go >= 1.24 is needed"
fi
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=mod"
# Niced, so a developer's `make deps` leaves the machine usable; `make test` (scripts/test.sh)
# sets STARLING_GO_NICE=0, as its e2e phase waits for this build.
GO=(nice -n "${STARLING_GO_NICE:-10}" go)
log "go: $GOV, GOMODCACHE=$(go env GOMODCACHE)"

if [[ $TIDY -eq 1 ]]; then
  for m in k8s etcd coredns; do
    run_step "tidy-$m" "$GO_DIR/$m" "${GO[@]}" mod tidy
  done
fi

# --- 3. Kubernetes -------------------------------------------------------------
K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
K8S_OUT="$CACHE_DIR/k8s-$K8S_VERSION"
fp=$(fingerprint "$K8S_VERSION" "$GO_DIR/k8s/go.mod" "$GO_DIR/k8s/go.sum" "$GO_DIR"/k8s/cmd/*/main.go)
if up_to_date "$K8S_OUT" "$fp" "${K8S_BINS[@]}"; then
  log "kubernetes $K8S_VERSION: cached in $K8S_OUT/bin"
else
  ver=${K8S_VERSION#v}
  major=${ver%%.*}; rest=${ver#*.}; minor=${rest%%.*}
  ldf="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldf+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean"
    ldf+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  rm -rf "$K8S_OUT.tmp" && mkdir -p "$K8S_OUT.tmp/bin"
  log "kubernetes $K8S_VERSION: building ${K8S_BINS[*]} (about 7 min on 2 cores the first time)"
  run_step build-kubernetes "$GO_DIR/k8s" "${GO[@]}" build -trimpath -ldflags "$ldf" -o "$K8S_OUT.tmp/bin/" ./cmd/...
  STEP=build-kubernetes
  grep -qx "Kubernetes $K8S_VERSION" <<<"$("$K8S_OUT.tmp/bin/kube-apiserver" --version)" \
    || die "built kube-apiserver does not report $K8S_VERSION"
  mark_built "$K8S_OUT.tmp" "$fp"
  rm -rf "$K8S_OUT" && mv "$K8S_OUT.tmp" "$K8S_OUT"
fi
link_bins "$K8S_OUT" "${K8S_BINS[@]}"

# --- 4. etcd -------------------------------------------------------------------
ETCD_OUT="$CACHE_DIR/etcd-$ETCD_VERSION"
fp=$(fingerprint "$ETCD_VERSION" "$GO_DIR/etcd/go.mod" "$GO_DIR/etcd/go.sum" "$GO_DIR/etcd/main.go")
if up_to_date "$ETCD_OUT" "$fp" etcd; then
  log "etcd $ETCD_VERSION: cached"
else
  rm -rf "$ETCD_OUT.tmp" && mkdir -p "$ETCD_OUT.tmp/bin"
  run_step build-etcd "$GO_DIR/etcd" "${GO[@]}" build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION" -o "$ETCD_OUT.tmp/bin/etcd" .
  STEP=build-etcd
  grep -q "etcd Version: ${ETCD_VERSION#v}" <<<"$("$ETCD_OUT.tmp/bin/etcd" --version)" \
    || die "built etcd does not report ${ETCD_VERSION#v}"
  mark_built "$ETCD_OUT.tmp" "$fp"
  rm -rf "$ETCD_OUT" && mv "$ETCD_OUT.tmp" "$ETCD_OUT"
fi
link_bins "$ETCD_OUT" etcd

# --- 5. CoreDNS ----------------------------------------------------------------
COREDNS_OUT="$CACHE_DIR/coredns-$COREDNS_VERSION"
fp=$(fingerprint "$COREDNS_VERSION" "$GO_DIR/coredns/go.mod" "$GO_DIR/coredns/go.sum" "$GO_DIR/coredns/main.go")
if up_to_date "$COREDNS_OUT" "$fp" coredns; then
  log "coredns $COREDNS_VERSION: cached"
else
  rm -rf "$COREDNS_OUT.tmp" && mkdir -p "$COREDNS_OUT.tmp/bin"
  run_step build-coredns "$GO_DIR/coredns" "${GO[@]}" build -trimpath -ldflags "-s -w" -o "$COREDNS_OUT.tmp/bin/coredns" .
  STEP=build-coredns
  grep -q "CoreDNS-${COREDNS_VERSION#v}" <<<"$("$COREDNS_OUT.tmp/bin/coredns" -version)" \
    || die "built coredns does not report ${COREDNS_VERSION#v}"
  mark_built "$COREDNS_OUT.tmp" "$fp"
  rm -rf "$COREDNS_OUT" && mv "$COREDNS_OUT.tmp" "$COREDNS_OUT"
fi
link_bins "$COREDNS_OUT" coredns

# --- 6. go install'ed tools ----------------------------------------------------
# go_install NAME VERSION MODULE_PATH PKG LDFLAGS
go_install() {
  local name=$1 version=$2 pkg=$3 ldflags=$4 out="$CACHE_DIR/$1-$2"
  local fp; fp=$(fingerprint "$pkg@$version $ldflags")
  if up_to_date "$out" "$fp" "$name"; then
    log "$name $version: cached"
  else
    rm -rf "$out.tmp" && mkdir -p "$out.tmp/bin"
    # Outside any module, so the repo's go.mod (none) and the wrappers do not interfere.
    run_step "install-$name" "$out.tmp" env GOBIN="$out.tmp/bin" GOFLAGS=-buildvcs=false \
      "${GO[@]}" install -trimpath -ldflags "$ldflags" "$pkg@$version"
    STEP="install-$name"
    [[ -x "$out.tmp/bin/$name" ]] || die "go install did not produce $name"
    mark_built "$out.tmp" "$fp"
    rm -rf "$out" && mv "$out.tmp" "$out"
  fi
  link_bins "$out" "$name"
}
go_install local-path-provisioner "$LOCAL_PATH_VERSION" github.com/rancher/local-path-provisioner \
  "-s -w -X main.VERSION=$LOCAL_PATH_VERSION"
go_install helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
  "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
STEP=helm
grep -q "^${HELM_VERSION}" <<<"$("$BIN_DIR/helm" version --short)" || die "helm does not report $HELM_VERSION"
# crane builds every image (e2e/images/crane.sh); needed by step 8 below.
go_install crane "$CRANE_VERSION" github.com/google/go-containerregistry/cmd/crane \
  "-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$CRANE_VERSION"
STEP=crane
[[ "$("$BIN_DIR/crane" version)" == "$CRANE_VERSION" ]] || die "crane does not report $CRANE_VERSION"

# --- 7. pause (static C) -------------------------------------------------------
PAUSE_SRC="$E2E_CLUSTER_DIR/pause/pause.c"
PAUSE_OUT="$CACHE_DIR/pause-$PAUSE_VERSION"
fp=$(fingerprint "$PAUSE_VERSION" "$PAUSE_SRC")
if up_to_date "$PAUSE_OUT" "$fp" pause; then
  log "pause $PAUSE_VERSION: cached"
else
  rm -rf "$PAUSE_OUT" && mkdir -p "$PAUSE_OUT/bin"
  run_step build-pause "$PAUSE_OUT" gcc -static -Os -s -DPAUSE_VERSION="\"$PAUSE_VERSION\"" -o "$PAUSE_OUT/bin/pause" "$PAUSE_SRC"
  mark_built "$PAUSE_OUT" "$fp"
fi

# --- 8. system image tars --------------------------------------------------------
STEP=system-images
sys_args=()
[[ $FORCE -eq 1 ]] && sys_args+=(--force)
"$E2E_DIR/images/system-images.sh" "${sys_args[@]}"

STEP=""
log "install complete in $((SECONDS - START))s; tools linked in $BIN_DIR"
