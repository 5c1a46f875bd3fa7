#!/usr/bin/env bash
# Stops the local cluster that e2e/cluster/up.sh started and wipes its state.
#
#   e2e/cluster/down.sh            stop everything and delete $STARLING_E2E_DIR
#   e2e/cluster/down.sh --keep     stop everything, keep logs/ (state is still wiped)
#
# Only processes recorded under $STARLING_E2E_DIR/pids (and the containerd shims
# and containers recorded in its containerd state) are stopped, by PID.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KEEP_LOGS=0
[[ "${1:-}" == "--keep" ]] && KEEP_LOGS=1
need_root
D="$STATE_DIR"
SOCK="$D/containerd/containerd.sock"
START=$SECONDS

if [[ ! -d "$D" ]]; then
  log "nothing to do: $D does not exist"
  exit 0
fi
# Refuse to wipe something that is obviously not ours.
case "$D" in
  /|/var|/var/tmp|/tmp|/root|/home|"$HOME") die "refusing to use $D as the state dir" ;;
esac

# ours PID: the process's command line mentions the state dir (guards against
# PID reuse after a reboot).
ours() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$D"; }

# stop_pid NAME PID TIMEOUT_S
stop_pid() {
  local name=$1 pid=$2 timeout=$3 i
  pid_alive "$pid" || return 0
  log "$name: stopping pid $pid"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do
    pid_alive "$pid" || return 0
    sleep 0.1
  done
  log "$name: still alive after ${timeout}s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    pid_alive "$pid" || return 0
    sleep 0.1
  done
  log "warning: $name (pid $pid) did not exit"
}

stop_component() { # stop_component NAME TIMEOUT_S
  local f="$D/pids/$1.pid" pid
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f")
  if pid_alive "$pid" && ! ours "$pid"; then
    log "$1: pid $pid is not ours any more (reused); leaving it alone"
  else
    stop_pid "$1" "$pid" "$2"
  fi
  rm -f "$f"
}

# 1. The node agents first, so nothing restarts containers behind our back.
stop_component kube-proxy 10
stop_component kubelet 15

# 2. Containers: kill every task while containerd still runs, then make sure
#    every recorded container init and shim is gone.
cpid=$(cat "$D/pids/containerd.pid" 2>/dev/null || true)
if [[ -n "$cpid" ]] && pid_alive "$cpid" && [[ -S "$SOCK" ]]; then
  ids=$(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null || true)
  if [[ -n "$ids" ]]; then
    log "containerd: killing $(wc -w <<<"$ids") tasks"
    for id in $ids; do ctr -a "$SOCK" -n k8s.io tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    for id in $ids; do ctr -a "$SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true; done
  fi
fi
TASK_DIR="$D/containerd/state/io.containerd.runtime.v2.task"
if [[ -d "$TASK_DIR" ]]; then
  for dir in "$TASK_DIR"/*/*/; do
    [[ -d "$dir" ]] || continue
    id=$(basename "$dir")
    if [[ -f "$dir/init.pid" ]]; then
      pid=$(cat "$dir/init.pid")
      # A container's init is ours when its cgroup path names the container.
      if pid_alive "$pid" && grep -qF "$id" "/proc/$pid/cgroup" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
      fi
    fi
    if [[ -f "$dir/shim.pid" ]]; then
      pid=$(cat "$dir/shim.pid")
      if pid_alive "$pid" && ours "$pid"; then stop_pid "shim ${id:0:12}" "$pid" 5; fi
    fi
  done
fi
stop_component containerd 15

# 3. Control plane: controllers and API server together, then etcd.
pids=()
for c in kube-scheduler kube-controller-manager kube-apiserver; do
  f="$D/pids/$c.pid"
  [[ -f "$f" ]] || continue
  pid=$(cat "$f")
  if pid_alive "$pid" && ours "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    pids+=("$c:$pid")
  fi
done
for entry in "${pids[@]}"; do
  stop_pid "${entry%%:*}" "${entry#*:}" 15
  rm -f "$D/pids/${entry%%:*}.pid"
done
stop_component etcd 10

# 4. Host networking left behind: kube-proxy rules, CNI bridge and masquerade rules.
if [[ -x "$BIN_DIR/kube-proxy" ]]; then
  "$BIN_DIR/kube-proxy" --cleanup >/dev/null 2>&1 || log "warning: kube-proxy --cleanup reported errors"
fi

# clean_ipt IPTABLES: delete the rules tagged for our CNI network, the CNI-*
# chains they jump to, and the KUBE-* chains that kubelet created.
clean_ipt() {
  local ipt=$1 table rule chains chain
  command -v "$ipt" >/dev/null || return 0
  for table in nat filter mangle; do
    "$ipt" -t "$table" -S >/dev/null 2>&1 || continue
    chains=()
    while IFS= read -r rule; do
      [[ "$rule" == -A* ]] || continue
      if [[ "$rule" == *'name: \"starling-e2e\"'* ]]; then
        [[ "$rule" =~ -j\ (CNI-[A-Za-z0-9_-]+) ]] && chains+=("${BASH_REMATCH[1]}")
        eval "\"$ipt\" -t $table ${rule/-A/-D}" 2>/dev/null || true
      fi
    done < <("$ipt" -t "$table" -S)
    # kubelet's own chains (kube-proxy --cleanup removed kube-proxy's).
    while IFS= read -r rule; do
      if [[ "$rule" =~ ^-A\ [A-Z]+\ .*-j\ (KUBE-[A-Z-]+) ]]; then
        chain=${BASH_REMATCH[1]}
        chains+=("$chain")
        eval "\"$ipt\" -t $table ${rule/-A/-D}" 2>/dev/null || true
      fi
    done < <("$ipt" -t "$table" -S | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) ')
    while IFS= read -r chain; do chains+=("$chain"); done \
      < <("$ipt" -t "$table" -S | awk '$1=="-N" && $2 ~ /^KUBE-/ {print $2}')
    for chain in "${chains[@]}"; do
      "$ipt" -t "$table" -F "$chain" 2>/dev/null || true
    done
    for chain in "${chains[@]}"; do
      "$ipt" -t "$table" -X "$chain" 2>/dev/null || true
    done
  done
}
clean_ipt iptables
clean_ipt ip6tables

if ip link show cni0 >/dev/null 2>&1; then
  log "network: removing cni0"
  ip link delete cni0 || log "warning: could not delete cni0"
fi
rm -f /var/lib/cni/results/starling-e2e-* 2>/dev/null || true

# 5. Mounts under the state dir (pod volumes, netns, overlay rootfs, etcd tmpfs).
mapfile -t mounts < <(findmnt -rn -o TARGET | grep -F "$D/" | sort -r || true)
if [[ ${#mounts[@]} -gt 0 ]]; then
  log "mounts: unmounting ${#mounts[@]} under $D"
  for m in "${mounts[@]}"; do
    m=$(printf '%b' "$m") # findmnt -r escapes blanks as \x20
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: cannot unmount $m"
  done
fi
left=$(findmnt -rn -o TARGET | grep -cF "$D/" || true)
if [[ "$left" -gt 0 ]]; then
  findmnt -rn -o TARGET | grep -F "$D/" >&2
  die "$left mounts are still under $D; not deleting it (unmount them and re-run down.sh)"
fi

# 6. Empty pod cgroups the kubelet created (cgroup v1, cgroupfs driver).
for cg in /sys/fs/cgroup/*/kubepods; do
  if [[ -d "$cg" ]]; then find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
done

# 7. State.
if [[ $KEEP_LOGS -eq 1 && -d "$D/logs" ]]; then
  keep=$(mktemp -d)
  mv "$D/logs" "$keep/logs"
  rm -rf --one-file-system "$D"
  mkdir -p "$D" && mv "$keep/logs" "$D/logs" && rmdir "$keep"
  log "state wiped; logs kept in $D/logs"
else
  rm -rf --one-file-system "$D"
  log "state wiped: $D"
fi
log "cluster down in $((SECONDS - START))s"
