# shellcheck shell=bash disable=SC2034
# Shared settings and helpers for e2e/cluster/*.sh. Sourced, never run.
#
# Environment (all optional):
#   STARLING_CACHE_DIR  where built binaries and image tars are cached
#                       (default: ${XDG_CACHE_HOME:-$HOME/.cache}/starling)
#   STARLING_E2E_DIR    state, PIDs and logs of the running cluster
#                       (default: /var/tmp/starling-e2e)

set -euo pipefail

E2E_CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
E2E_DIR="$(dirname "$E2E_CLUSTER_DIR")"
REPO_ROOT="$(dirname "$E2E_DIR")"

# Pinned versions. Changing one changes its cache directory, so the next
# install.sh rebuilds exactly that part.
K8S_VERSION=v1.34.4
ETCD_VERSION=v3.6.5
COREDNS_VERSION=v1.12.4
LOCAL_PATH_VERSION=v0.0.30
HELM_VERSION=v3.22.0
CRANE_VERSION=v0.22.1   # go-containerregistry: builds the images (e2e/images/crane.sh)
PAUSE_VERSION=3.10-starling

# jq and bc: bench/compare and bench/operator-scale (on this machine's image already).
DEB_PACKAGES=(containerd runc containernetworking-plugins busybox-static iptables
  conntrack socat openssl ethtool iproute2 procps curl prometheus gcc python3-yaml jq bc)

CACHE_DIR="${STARLING_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/starling}"
# Stable links to every cached tool (kubectl, helm, ...): handy on PATH.
BIN_DIR="$CACHE_DIR/bin"
IMAGE_CACHE="$CACHE_DIR/images"

STATE_DIR="${STARLING_E2E_DIR:-/var/tmp/starling-e2e}"
KUBECONFIG_PATH="$STATE_DIR/kubeconfig"

NODE_NAME="${STARLING_NODE_NAME:-starling-node}"
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
DNS_SERVICE_IP=10.96.0.10
CLUSTER_CIDR=10.244.0.0/16
POD_CIDR=10.244.0.0/24
CLUSTER_DOMAIN=cluster.local

# Image refs as the kubelet sees them (a name without a registry is docker.io/...).
PAUSE_IMAGE="docker.io/starling-e2e/pause:$PAUSE_VERSION"
COREDNS_IMAGE="docker.io/starling-e2e/coredns:${COREDNS_VERSION#v}"
LOCAL_PATH_IMAGE="docker.io/starling-e2e/local-path-provisioner:$LOCAL_PATH_VERSION"
BUSYBOX_IMAGE="docker.io/starling-e2e/busybox:1.35"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2; exit 1; }

# bin NAME -> path of a cached tool, or empty when missing.
bin() {
  local p="$BIN_DIR/$1"
  [[ -x "$p" ]] && printf '%s\n' "$p"
}

# import_images SOCKET FILE.tar...: image archives into containerd's k8s.io
# namespace, where the kubelet finds them.
import_images() {
  local sock=$1 f; shift
  for f in "$@"; do
    ctr -a "$sock" -n k8s.io images import "$f" >&2 || die "importing $f into $sock failed"
  done
}

need_root() {
  [[ $(id -u) -eq 0 ]] || die "$(basename "$0") must run as root (it manages containerd, iptables, mounts)"
}

# The node's primary IPv4 address: source address of the default route,
# falling back to the first global address.
node_ip() {
  local ip
  ip=$(ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i=1;i<NF;i++) if ($i=="src") {print $(i+1); exit}}') || true
  if [[ -z "$ip" ]]; then
    ip=$(ip -4 -o addr show scope global | awk '{split($4,a,"/"); print a[1]; exit}')
  fi
  [[ -n "$ip" ]] || die "cannot find the node's IPv4 address (no default route, no global address)"
  printf '%s\n' "$ip"
}

# pid_alive PID: true while the process exists and is not a zombie. PID 1 on
# these machines reaps lazily, so kill -0 would report zombies as alive.
pid_alive() {
  local pid=$1 state
  [[ -r /proc/$pid/stat ]] || return 1
  state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [[ -n "$state" && "$state" != Z && "$state" != X ]]
}
