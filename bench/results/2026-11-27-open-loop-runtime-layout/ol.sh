#!/usr/bin/env bash
# ol.sh LAYOUT NAME OUTJ -- bench args...
# LAYOUT: default | w1 (1 tokio worker each) | pin (1 worker each, broker on cpu1, generator on cpu0)
set -u
layout=$1; prof=$2; outj=$3; shift 3
b=/work/main/target/dist/starling-broker; c=/work/main/target/dist/starling; port=26000
case $layout in
  default) benv=(); cenv=(); bpin=(); cpin=();;
  w1) benv=(TOKIO_WORKER_THREADS=1); cenv=(TOKIO_WORKER_THREADS=1); bpin=(); cpin=();;
  pin) benv=(TOKIO_WORKER_THREADS=1); cenv=(TOKIO_WORKER_THREADS=1); bpin=(taskset -c 1); cpin=(taskset -c 0);;
  bw1) benv=(TOKIO_WORKER_THREADS=1); cenv=(); bpin=(); cpin=();;
  cw1) benv=(); cenv=(TOKIO_WORKER_THREADS=1); bpin=(); cpin=();;
  pin2) benv=(); cenv=(); bpin=(taskset -c 1); cpin=(taskset -c 0);;
esac
env "${benv[@]}" ${XENV:-} STARLING_AUTH_MODE=none STARLING_PROFILE=$prof STARLING_QUIC_LISTEN=127.0.0.1:$port STARLING_HTTP_LISTEN=127.0.0.1:$((port+1)) \
STARLING_TLS_CERT_FILE=/tmp/cb/tls/cert.pem STARLING_TLS_KEY_FILE=/tmp/cb/tls/key.pem STARLING_LOG_LEVEL=warn STARLING_DRAIN_TIMEOUT_MS=500 \
  "${bpin[@]}" $b >/tmp/ol/broker.log 2>&1 &
pid=$!
for _ in $(seq 200); do curl -sf -o /dev/null "http://127.0.0.1:$((port+1))/readyz" && break; sleep 0.05; done
env "${cenv[@]}" "${cpin[@]}" $c --profile $prof bench --server 127.0.0.1:$port --ca /tmp/cb/tls/cert.pem --metrics-addr 127.0.0.1:$((port+1)) --broker-pid $pid --no-progress --name "$layout" --json "$outj" "$@" >/tmp/ol/c.log 2>&1 || { echo FAIL; tail -3 /tmp/ol/c.log; }
kill $pid; wait $pid 2>/dev/null
python3 -c "
import json;d=json.load(open('$outj'));l=d['latency_us']
print('%-8s rate=%s deliv=%d p50=%d p99=%d p999=%d lost=%d bcpu=%.2f ccpu=%.2f load=%s'%('$layout',d['config'].get('rate'),d['delivered_msgs_per_s'],l['p50'],l['p99'],l['p999'],d['lost'],d['broker_cpu_s'],d['client_cpu_s'],d['load_avg']))"
