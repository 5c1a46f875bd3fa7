#!/usr/bin/env bash
# Starts a real single-node Kubernetes on this machine: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd (private config, state and
# socket) with runc and bridge CNI, kubelet, kube-proxy, then CoreDNS and
# local-path-provisioner (the default StorageClass).
#
#   e2e/cluster/up.sh
#
# Everything lives under $STARLING_E2E_DIR (default /var/tmp/starling-e2e):
#   kubeconfig        admin kubeconfig (server https://127.0.0.1:6443)
#   env               shell-sourceable facts (KUBECONFIG, CONTAINERD_ADDRESS, NODE_IP, ...)
#   logs/<name>.log   one log per component;   pids/<name>.pid   one PID per component
# If a healthy cluster from the same dir is already up, it says so and exits 0.
# Run e2e/cluster/install.sh first; stop with e2e/cluster/down.sh.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
START=$SECONDS
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)
D="$STATE_DIR"
PKI="$D/pki"
SOCK="$D/containerd/containerd.sock"
KUBECTL="$BIN_DIR/kubectl"
CURRENT=""   # component being started, for the failure report

for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  [[ -x "$BIN_DIR/$b" ]] || die "$b is not built: run e2e/cluster/install.sh first"
done
for t in pause coredns local-path-provisioner busybox; do
  [[ -f "$IMAGE_CACHE/$t.tar" ]] || die "image tar $IMAGE_CACHE/$t.tar missing: run e2e/cluster/install.sh first"
done

k() { "$KUBECTL" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

pid_of() { [[ -f "$D/pids/$1.pid" ]] && cat "$D/pids/$1.pid"; }

report_failure() {
  local name=$1 msg=$2
  CURRENT=""   # reported here; the EXIT trap must not report it again
  printf '\nup.sh: FAILED: %s: %s\n' "$name" "$msg" >&2
  local logf="$D/logs/$name.log"
  if [[ -f "$logf" ]]; then
    printf -- '--- last 40 lines of %s ---\n' "$logf" >&2
    tail -n 40 "$logf" >&2
    printf -- '--- end ---\n' >&2
  fi
  printf 'State, logs and PIDs are in %s; run e2e/cluster/down.sh to stop and clean up.\n' "$D" >&2
  exit 1
}

on_exit() {
  local rc=$?
  if [[ $rc -ne 0 && -n "$CURRENT" ]]; then
    trap - EXIT
    report_failure "$CURRENT" "exited with status $rc while starting it"
  fi
}
trap on_exit EXIT

# --- already up? -------------------------------------------------------------
cluster_healthy() {
  local c pid
  for c in "${COMPONENTS[@]}"; do
    pid=$(pid_of "$c") || return 1
    pid_alive "$pid" || return 1
  done
  [[ -f "$KUBECONFIG_PATH" ]] || return 1
  k get --raw /readyz >/dev/null 2>&1 || return 1
  [[ "$(k get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

if [[ -d "$D/pids" ]]; then
  if cluster_healthy; then
    log "cluster already up (state dir $D); KUBECONFIG=$KUBECONFIG_PATH"
    exit 0
  fi
  alive=()
  for c in "${COMPONENTS[@]}"; do
    pid=$(pid_of "$c") || continue
    pid_alive "$pid" && alive+=("$c")
  done
  # Ours (its PIDs are in our state dir), but not healthy: e.g. left up by a run that kept it
  # (STARLING_E2E_KEEP=1) and broken since. Starting over is what any caller wants.
  if [[ ${#alive[@]} -gt 0 ]]; then
    log "an unhealthy cluster from $D is running (${alive[*]} alive): stopping it with down.sh"
  else
    log "stale state in $D (nothing running): cleaning it with down.sh"
  fi
  "$E2E_CLUSTER_DIR/down.sh"
fi

# --- preflight -----------------------------------------------------------------
NODE_IP=$(node_ip)
PORTS=(2379 2380 6443 10248 10249 10250 10256 10257 10259)
busy=$(ss -Hltn 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
for p in "${PORTS[@]}"; do
  if grep -qx "$p" <<<"$busy"; then
    die "TCP port $p is already in use (another cluster? see 'ss -ltnp'); up.sh needs ${PORTS[*]}"
  fi
done
if ip link show cni0 >/dev/null 2>&1; then
  die "a cni0 bridge already exists (left over by another cluster?); run e2e/cluster/down.sh"
fi
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || die "overlayfs is not available"
if [[ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ]]; then
  modprobe br_netfilter 2>/dev/null || die "br_netfilter is not available (/proc/sys/net/bridge missing)"
fi
sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 >/dev/null \
  || die "cannot set net.ipv4.ip_forward / net.bridge.bridge-nf-call-iptables"

mkdir -p "$D"/{pki,logs,pids,kubeconfigs,etcd,containerd,cni/net.d,cni/ipam,kubelet,pod-logs,addons,local-path}
chmod 700 "$D/pki"
log "state dir $D, node $NODE_NAME at $NODE_IP"

# etcd data on tmpfs: faster, and it is thrown away by down.sh anyway.
if [[ "${STARLING_E2E_ETCD_TMPFS:-1}" == 1 ]] && ! mountpoint -q "$D/etcd"; then
  mount -t tmpfs -o size=1g,mode=700 tmpfs "$D/etcd" || log "warning: tmpfs mount for etcd failed; using disk"
fi

# --- PKI -------------------------------------------------------------------------
t0=$SECONDS
OPENSSL_CNF="$PKI/openssl.cnf"
cat >"$OPENSSL_CNF" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
EOF
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
  -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 -subj "/CN=starling-e2e-ca" \
  -config "$OPENSSL_CNF" -extensions ca 2>/dev/null

# cert NAME SUBJECT USAGE [SANS]: USAGE is clientAuth, serverAuth or both.
cert() {
  local name=$1 subj=$2 usage=$3 sans=${4:-}
  local ext="$PKI/$name.ext"
  {
    echo "basicConstraints = critical, CA:FALSE"
    echo "keyUsage = critical, digitalSignature, keyEncipherment"
    echo "extendedKeyUsage = $usage"
    [[ -n "$sans" ]] && echo "subjectAltName = $sans"
  } >"$ext"
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout "$PKI/$name.key" -subj "$subj" -config "$OPENSSL_CNF" 2>/dev/null |
    openssl x509 -req -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 365 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$ext"
}
HOST=$(hostname)
cert apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN,DNS:localhost,DNS:$HOST,IP:127.0.0.1,IP:$NODE_IP,IP:$API_SERVICE_IP"
cert admin "/O=system:masters/CN=starling-e2e-admin" clientAuth
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
# Full rights, so it can run with --use-service-account-credentials=false.
cert controller-manager "/O=system:masters/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kube-proxy "/CN=system:kube-proxy" clientAuth
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
cert kubelet-serving "/CN=$NODE_NAME" serverAuth "DNS:$NODE_NAME,DNS:$HOST,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1"
openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
chmod 600 "$PKI"/*.key

# kubeconfig FILE CERTNAME SERVER
kubeconfig() {
  local file=$1 name=$2 server=$3
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: starling-e2e
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$name.crt")
    client-key-data: $(base64 -w0 "$PKI/$name.key")
contexts:
- name: starling-e2e
  context:
    cluster: starling-e2e
    user: $name
current-context: starling-e2e
EOF
  chmod 600 "$file"
}
API_LOCAL=https://127.0.0.1:6443
kubeconfig "$KUBECONFIG_PATH" admin "$API_LOCAL"
for c in controller-manager scheduler kube-proxy kubelet; do
  kubeconfig "$D/kubeconfigs/$c.kubeconfig" "$c" "$API_LOCAL"
done
log "pki: CA, certificates and kubeconfigs written in $((SECONDS - t0))s"

# --- process helpers ---------------------------------------------------------------
# start NAME BINARY ARGS...: runs it in its own session, output to logs/NAME.log.
start() {
  local name=$1; shift
  CURRENT=$name
  log "$name: starting"
  setsid "$@" >>"$D/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$D/pids/$name.pid"
}

# wait_for NAME TIMEOUT_S DESCRIPTION CMD...: polls CMD until it succeeds; fails
# early when NAME's process died.
wait_for() {
  local name=$1 timeout=$2 what=$3; shift 3
  local t0=$SECONDS pid
  pid=$(pid_of "$name" || true)
  while :; do
    if "$@" >/dev/null 2>&1; then
      log "$name: $what after $((SECONDS - t0))s"
      return 0
    fi
    if [[ -n "$pid" ]] && ! pid_alive "$pid"; then
      report_failure "$name" "process $pid exited before it was $what"
    fi
    if (( SECONDS - t0 >= timeout )); then
      report_failure "$name" "not $what after ${timeout}s"
    fi
    sleep 0.2
  done
}

CURL=(curl -fsS --max-time 2)
API_CURL=("${CURL[@]}" --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")

# --- control plane -------------------------------------------------------------------
start etcd "$BIN_DIR/etcd" \
  --name=starling-e2e \
  --data-dir="$D/etcd/data" \
  --listen-client-urls=http://127.0.0.1:2379 \
  --advertise-client-urls=http://127.0.0.1:2379 \
  --listen-peer-urls=http://127.0.0.1:2380 \
  --initial-advertise-peer-urls=http://127.0.0.1:2380 \
  --initial-cluster=starling-e2e=http://127.0.0.1:2380 \
  --unsafe-no-fsync=true \
  --log-level=warn
wait_for etcd 30 healthy "${CURL[@]}" http://127.0.0.1:2379/health

start kube-apiserver "$BIN_DIR/kube-apiserver" \
  --etcd-servers=http://127.0.0.1:2379 \
  --bind-address=0.0.0.0 \
  --secure-port=6443 \
  --advertise-address="$NODE_IP" \
  --tls-cert-file="$PKI/apiserver.crt" \
  --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$PKI/ca.crt" \
  --kubelet-preferred-address-types=InternalIP,Hostname \
  --service-account-issuer=https://kubernetes.default.svc.$CLUSTER_DOMAIN \
  --service-account-key-file="$PKI/sa.pub" \
  --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction \
  --allow-privileged=true \
  --endpoint-reconciler-type=lease \
  --profiling=false
wait_for kube-apiserver 60 ready "${API_CURL[@]}" "$API_LOCAL/readyz"

start kube-controller-manager "$BIN_DIR/kube-controller-manager" \
  --kubeconfig="$D/kubeconfigs/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$D/kubeconfigs/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$D/kubeconfigs/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 \
  --controllers='*' \
  --service-account-private-key-file="$PKI/sa.key" \
  --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" \
  --cluster-signing-key-file="$PKI/ca.key" \
  --allocate-node-cidrs=true \
  --cluster-cidr="$CLUSTER_CIDR" \
  --node-cidr-mask-size=24 \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --use-service-account-credentials=false \
  --leader-elect=false \
  --profiling=false

start kube-scheduler "$BIN_DIR/kube-scheduler" \
  --kubeconfig="$D/kubeconfigs/scheduler.kubeconfig" \
  --authentication-kubeconfig="$D/kubeconfigs/scheduler.kubeconfig" \
  --authorization-kubeconfig="$D/kubeconfigs/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 \
  --leader-elect=false \
  --profiling=false

wait_for kube-controller-manager 60 healthy "${CURL[@]}" -k https://127.0.0.1:10257/healthz
wait_for kube-scheduler 60 healthy "${CURL[@]}" -k https://127.0.0.1:10259/healthz

# --- node: containerd ------------------------------------------------------------------
cat >"$D/cni/net.d/10-starling-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "starling-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$D/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF

cat >"$D/containerd/config.toml" <<EOF
version = 2
root = "$D/containerd/root"
state = "$D/containerd/state"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "$SOCK"

[plugins."io.containerd.internal.v1.opt"]
  path = "$D/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$D/cni/net.d"
    max_conf_num = 1
EOF

start containerd containerd --config "$D/containerd/config.toml"
wait_for containerd 30 serving ctr -a "$SOCK" version

CURRENT=images
t0=$SECONDS
( import_images "$SOCK" \
  "$IMAGE_CACHE/pause.tar" "$IMAGE_CACHE/coredns.tar" \
  "$IMAGE_CACHE/local-path-provisioner.tar" "$IMAGE_CACHE/busybox.tar" ) 2>>"$D/logs/images.log" \
  || report_failure images "importing the system images failed"
log "images: pause, coredns, local-path-provisioner, busybox imported in $((SECONDS - t0))s"

# --- node: kubelet -----------------------------------------------------------------------
cat >"$D/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: $CLUSTER_DOMAIN
# No host resolver inside pods: only cluster names resolve, and pods send no
# DNS traffic off the machine.
resolvConf: ""
podLogsDir: $D/pod-logs
volumePluginDir: $D/kubelet/volume-plugins
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
evictionPressureTransitionPeriod: 10s
maxPods: 110
EOF

start kubelet "$BIN_DIR/kubelet" \
  --config="$D/kubelet/config.yaml" \
  --kubeconfig="$D/kubeconfigs/kubelet.kubeconfig" \
  --root-dir="$D/kubelet" \
  --hostname-override="$NODE_NAME" \
  --node-ip="$NODE_IP"
wait_for kubelet 60 healthy "${CURL[@]}" http://127.0.0.1:10248/healthz

# --- node: kube-proxy ----------------------------------------------------------------------
cat >"$D/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $D/kubeconfigs/kube-proxy.kubeconfig
mode: iptables
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $NODE_NAME
oomScoreAdj: 0
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
start kube-proxy "$BIN_DIR/kube-proxy" --config="$D/kube-proxy.yaml"

node_ready() {
  [[ "$(k get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}
wait_for kubelet 90 "registered and Ready" node_ready
wait_for kube-proxy 60 healthy "${CURL[@]}" http://127.0.0.1:10256/healthz
CURRENT=""

# --- addons ------------------------------------------------------------------------------
cat >"$D/addons/coredns.yaml" <<EOF
apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
    .:53 {
        errors
        health {
            lameduck 2s
        }
        ready
        kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 30
        }
        hosts {
            $NODE_IP $NODE_NAME
            fallthrough
        }
        cache 30
        reload
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      tolerations:
      - {key: CriticalAddonsOnly, operator: Exists}
      securityContext:
        runAsUser: 65532
        runAsGroup: 65532
        runAsNonRoot: true
        sysctls:
        - {name: net.ipv4.ip_unprivileged_port_start, value: "0"}
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        resources:
          requests: {cpu: 20m, memory: 32Mi}
          limits: {memory: 128Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        livenessProbe:
          httpGet: {path: /health, port: 8080}
          initialDelaySeconds: 10
          periodSeconds: 10
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        volumeMounts:
        - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
      - name: config
        configMap:
          name: coredns
          items: [{key: Corefile, path: Corefile}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: $DNS_SERVICE_IP
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF

cat >"$D/addons/local-path.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: local-path-storage
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: local-path-provisioner
  namespace: local-path-storage
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: local-path-provisioner
  namespace: local-path-storage
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, update, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: local-path-provisioner
  namespace: local-path-storage
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: local-path-provisioner
subjects:
- kind: ServiceAccount
  name: local-path-provisioner
  namespace: local-path-storage
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: local-path-provisioner
rules:
- apiGroups: [""]
  resources: [nodes, persistentvolumeclaims, configmaps, pods, pods/log]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: local-path-provisioner
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: local-path-provisioner
subjects:
- kind: ServiceAccount
  name: local-path-provisioner
  namespace: local-path-storage
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local-path-config
  namespace: local-path-storage
data:
  config.json: |-
    {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$D/local-path"]}]}
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata:
      name: helper-pod
    spec:
      priorityClassName: system-node-critical
      tolerations:
      - {key: node.kubernetes.io/disk-pressure, operator: Exists, effect: NoSchedule}
      containers:
      - name: helper-pod
        image: $BUSYBOX_IMAGE
        imagePullPolicy: Never
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: local-path-provisioner
  namespace: local-path-storage
spec:
  replicas: 1
  selector:
    matchLabels: {app: local-path-provisioner}
  template:
    metadata:
      labels: {app: local-path-provisioner}
    spec:
      serviceAccountName: local-path-provisioner
      priorityClassName: system-cluster-critical
      containers:
      - name: local-path-provisioner
        image: $LOCAL_PATH_IMAGE
        imagePullPolicy: Never
        command:
        - local-path-provisioner
        - start
        - --config=/etc/config/config.json
        - --service-account-name=local-path-provisioner
        - --helper-image=$BUSYBOX_IMAGE
        env:
        - name: POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        - {name: CONFIG_MOUNT_PATH, value: /etc/config/}
        resources:
          requests: {cpu: 10m, memory: 32Mi}
        volumeMounts:
        - {name: config, mountPath: /etc/config/}
      volumes:
      - name: config
        configMap:
          name: local-path-config
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
EOF

CURRENT=addons
k apply -f "$D/addons/coredns.yaml" -f "$D/addons/local-path.yaml" >>"$D/logs/addons.log" 2>&1 \
  || report_failure addons "kubectl apply of the addons failed"
CURRENT=""

# deploy_available NAMESPACE NAME
deploy_available() {
  [[ "$(k -n "$1" get deploy "$2" -o jsonpath='{.status.availableReplicas}' 2>/dev/null)" -ge 1 ]] 2>/dev/null
}
addon_failure() { # addon_failure NAMESPACE SELECTOR WHAT
  {
    echo "--- pods ---"
    k -n "$1" get pods -l "$2" -o wide 2>&1
    echo "--- describe ---"
    k -n "$1" describe pods -l "$2" 2>&1 | tail -n 30
    echo "--- container log ---"
    k -n "$1" logs -l "$2" --tail=20 2>&1
  } >>"$D/logs/addons.log"
  report_failure addons "$3"
}
t0=$SECONDS
until deploy_available kube-system coredns; do
  (( SECONDS - t0 < 120 )) || addon_failure kube-system k8s-app=kube-dns "CoreDNS not available after 120s"
  sleep 0.5
done
log "coredns: available after $((SECONDS - t0))s"
until deploy_available local-path-storage local-path-provisioner; do
  (( SECONDS - t0 < 120 )) || addon_failure local-path-storage app=local-path-provisioner "local-path-provisioner not available after 120s"
  sleep 0.5
done
log "local-path-provisioner: available after $((SECONDS - t0))s"

cat >"$D/env" <<EOF
# Written by e2e/cluster/up.sh; source it to talk to the local cluster.
export KUBECONFIG=$KUBECONFIG_PATH
export STARLING_E2E_DIR=$D
export CONTAINERD_ADDRESS=$SOCK
export NODE_IP=$NODE_IP
export NODE_NAME=$NODE_NAME
export PATH=$BIN_DIR:\$PATH
EOF

log "cluster up in $((SECONDS - START))s: KUBECONFIG=$KUBECONFIG_PATH (source $D/env for kubectl/helm on PATH)"
