#!/usr/bin/env bash
# Paired trials on a release broker: the Go client (nats-load -starling), the Rust SDK
# (starling-bench), nats.go on nats-server TLS; one fresh server per run, systems rotated.
set -uo pipefail
P=/work/targets/go/perf; cert=$P/tls/cert.pem; key=$P/tls/key.pem
broker=/work/targets/go/rel/release/starling-broker
sbench=/work/targets/go/rel/release/starling-bench
nats=/work/targets/go/bench-cache/bin/nats-server
TRIALS=${TRIALS:-3}; DURATION=${DURATION:-3s}; WARMUP=${WARMUP:-1s}
out=$P/out-rel; mkdir -p $out
declare -A W=([1p1s-256B]="--producers 1 --subscribers 1 --topics 1 --payload 256"
              [1p10s-4KB]="--producers 1 --subscribers 10 --topics 1 --payload 4096"
              [4p4s-1KB]="--producers 4 --subscribers 1 --topics 4 --payload 1024")
wait_ready() { for _ in $(seq 100); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done; return 1; }
start_starling() {
  STARLING_PROFILE=balanced STARLING_QUIC_LISTEN=127.0.0.1:24220 STARLING_HTTP_LISTEN=127.0.0.1:24221 STARLING_TLS_CERT_FILE=$cert \
  STARLING_TLS_KEY_FILE=$key STARLING_SLOW_SUBSCRIBER_POLICY=block STARLING_AUTH_MODE=none \
  STARLING_DRAIN_TIMEOUT_MS=1000 STARLING_LOG_LEVEL=warn $broker >> $out/broker.log 2>&1 &
  pid=$!; wait_ready http://127.0.0.1:24221/readyz
}
systems=(${SYSTEMS:-starling-go starling nats-tls})
for trial in $(seq $TRIALS); do
 for w in ${WORKLOADS:-1p1s-256B 1p10s-4KB 4p4s-1KB}; do
  n=${#systems[@]}
  for k in $(seq 0 $((n-1))); do
   sys=${systems[$(( (k + trial) % n ))]}
   json=$out/$w.$sys.$trial.json
   case $sys in
    nats-tls)
     $nats -a 127.0.0.1 -p 24222 -m 24223 --tls --tlscert $cert --tlskey $key >> $out/nats.log 2>&1 &
     pid=$!; wait_ready http://127.0.0.1:24223/healthz
     $P/nats-load-after -server tls://127.0.0.1:24222 -ca $cert -system nats-tls -server-pid $pid -name $w \
       -json $json -duration $DURATION -warmup $WARMUP ${W[$w]} > $out/$w.$sys.$trial.log 2>&1 ;;
    starling-go-before)
     start_starling
     $P/nats-load-before -starling 127.0.0.1:24220 -ca $cert -system starling-go -server-pid $pid -name $w \
       -json $json -duration $DURATION -warmup $WARMUP ${W[$w]} > $out/$w.$sys.$trial.log 2>&1 ;;
    starling-go)
     start_starling
     $P/nats-load-after -starling 127.0.0.1:24220 -ca $cert -system starling-go -server-pid $pid -name $w \
       -json $json -duration $DURATION -warmup $WARMUP ${W[$w]} > $out/$w.$sys.$trial.log 2>&1 ;;
    starling)
     start_starling
     $sbench --profile balanced --server 127.0.0.1:24220 --ca $cert --metrics-addr 127.0.0.1:24221 --broker-pid $pid \
       --no-progress --name $w --json $json --duration $DURATION --warmup $WARMUP ${W[$w]} > $out/$w.$sys.$trial.log 2>&1 ;;
   esac
   kill -TERM $pid; wait $pid 2>/dev/null
   printf '%s %s %s %s\n' "$w" "$sys" "$trial" "$(jq -r '[.delivered_msgs_per_s, .client_cpu_s, .lost, .load_avg] | @tsv' $json 2>/dev/null || echo FAILED)"
  done
 done
done
