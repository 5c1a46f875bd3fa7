#!/usr/bin/env bash
# Paired trials: the Go client before (c8ddf4b) and after (wt/go) against one debug broker
# config, and nats.go against nats-server TLS; one fresh server per run.
set -uo pipefail
P=/work/targets/go/perf; cert=$P/tls/cert.pem; key=$P/tls/key.pem
broker=/work/targets/go/debug/starling-broker
nats=/work/targets/go/bench-cache/bin/nats-server
TRIALS=${TRIALS:-3}; DURATION=${DURATION:-4s}; WARMUP=${WARMUP:-1s}
out=$P/out; mkdir -p $out
declare -A W=([1p1s-256B]="-producers 1 -subscribers 1 -topics 1 -payload 256"
              [1p10s-4KB]="-producers 1 -subscribers 10 -topics 1 -payload 4096"
              [4p4s-1KB]="-producers 4 -subscribers 1 -topics 4 -payload 1024")
wait_ready() { for _ in $(seq 100); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done; return 1; }
for trial in $(seq $TRIALS); do
 for w in ${WORKLOADS:-1p1s-256B 1p10s-4KB 4p4s-1KB}; do
  for sys in ${SYSTEMS:-before after nats-tls}; do
   json=$out/$w.$sys.$trial.json
   if [[ $sys == nats-tls ]]; then
     $nats -a 127.0.0.1 -p 24222 -m 24223 --tls --tlscert $cert --tlskey $key > $out/nats.log 2>&1 &
     pid=$!; wait_ready http://127.0.0.1:24223/healthz
     $P/nats-load-after -server tls://127.0.0.1:24222 -ca $cert -system nats-tls -server-pid $pid -name $w \
       -json $json -duration $DURATION -warmup $WARMUP ${W[$w]} > $out/$w.$sys.$trial.log 2>&1
   else
     STARLING_QUIC_LISTEN=127.0.0.1:24220 STARLING_HTTP_LISTEN=127.0.0.1:24221 STARLING_TLS_CERT_FILE=$cert \
     STARLING_TLS_KEY_FILE=$key STARLING_SLOW_SUBSCRIBER_POLICY=block STARLING_AUTH_MODE=none \
     STARLING_DRAIN_TIMEOUT_MS=1000 STARLING_LOG_LEVEL=warn $broker > $out/broker.log 2>&1 &
     pid=$!; wait_ready http://127.0.0.1:24221/readyz
     $P/nats-load-$sys -starling 127.0.0.1:24220 -ca $cert -system starling-go -server-pid $pid -name $w \
       -json $json -duration $DURATION -warmup $WARMUP ${W[$w]} > $out/$w.$sys.$trial.log 2>&1
   fi
   kill -TERM $pid; wait $pid 2>/dev/null
   printf '%s %s %s %s\n' "$w" "$sys" "$trial" "$(jq -r '[.delivered_msgs_per_s, .client_cpu_s, .broker_cpu_s, .delivered, .lost, .load_avg] | @tsv' $json 2>/dev/null || echo FAILED)"
  done
 done
done
