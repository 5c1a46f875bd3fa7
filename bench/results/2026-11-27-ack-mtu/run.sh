#!/usr/bin/env bash
# ackm.sh OUTDIR TRIALS: ACK frequency matrix; each trial runs every workload under every config,
# rotating the config order per trial. Writes OUTDIR/rows.tsv.
set -u
out=$1; trials=$2; mkdir -p $out
B=/work/main/target/release/starling-broker; C=/work/main/target/release/starling
cfgs=("none" "ack10" "mtu6550" "mtu6550+ack10")
port=23600
run_one() { # cfg workload trial
  local cfg=$1 w=$2 t=$3 X="" prof=balanced extra="" rate="" p=1 s=1 tp=1 pl=256 kind=pubsub
  [[ $cfg == *ack10* ]] && X="$X STARLING_QUIC_ACK_ELICITING_THRESHOLD=10 STARLING_QUIC_MAX_ACK_DELAY_US=2000"
  [[ $cfg == *mtu6550* ]] && X="$X STARLING_QUIC_MAX_MTU_DISCOVERY=6550"
  case $w in
    256B-closed) ;;
    256B-25) rate=72000 ;;
    256B-50) rate=144000 ;;
    4KB-fanout) s=10; pl=4096 ;;
    16KB) pl=16384 ;;
    latency-paced) prof=latency; extra="--batch 8"; rate=10000; s=5; pl=4096 ;;
    cache) kind=cache ;;
  esac
  env $X STARLING_AUTH_MODE=none STARLING_PROFILE=$prof STARLING_QUIC_LISTEN=127.0.0.1:$port STARLING_HTTP_LISTEN=127.0.0.1:$((port+1)) \
    STARLING_TLS_CERT_FILE=/tmp/cb/tls/cert.pem STARLING_TLS_KEY_FILE=/tmp/cb/tls/key.pem STARLING_LOG_LEVEL=warn STARLING_DRAIN_TIMEOUT_MS=500 STARLING_SLOW_SUBSCRIBER_POLICY=block \
    $B >>$out/broker.log 2>&1 &
  local pid=$!
  for _ in $(seq 200); do curl -sf -o /dev/null "http://127.0.0.1:$((port+1))/readyz" && break; sleep 0.05; done
  local json=$out/$w.${cfg/+/-}.$t.json
  if [[ $kind == cache ]]; then
    $C --profile $prof bench cache --server 127.0.0.1:$port --ca /tmp/cb/tls/cert.pem --metrics-addr 127.0.0.1:$((port+1)) --broker-pid $pid --no-progress --value-size 256 --concurrency 16 --keys 10000 --duration 2s --warmup 500ms --json $json >>$out/client.log 2>&1
  else
    $C --profile $prof bench $extra --server 127.0.0.1:$port --ca /tmp/cb/tls/cert.pem --producers $p --subscribers $s --topics $tp --payload $pl ${rate:+--rate $rate} --duration 3s --warmup 1s --metrics-addr 127.0.0.1:$((port+1)) --broker-pid $pid --no-progress --json $json >>$out/client.log 2>&1
  fi
  kill $pid; wait $pid 2>/dev/null
  python3 - "$json" "$w" "$cfg" "$t" "$(cut -d' ' -f1 /proc/loadavg)" >>$out/rows.tsv <<'P'
import json,sys
j,w,cfg,t,load=sys.argv[1:]
try: d=json.load(open(j))
except Exception as e:
    print('\t'.join([w,cfg,t,'FAIL','','','','','','',load])); sys.exit()
if d.get('cache'):
    c=d['cache']; rate=(c['put']['ops_per_s']+c['get_hit']['ops_per_s'])/2; l=c['get_hit']['latency_us']
else:
    rate=d['delivered_msgs_per_s']; l=d['latency_us']
print('\t'.join(str(x) for x in [w,cfg,t,round(rate),round(l['p50']),round(l['p99']),round(l['p999']),d.get('lost',0),d.get('broker_cpu_s'),d.get('client_cpu_s'),load]))
P
}
for t in $(seq $trials); do
  for w in ${WL:-256B-25 256B-50 256B-closed 4KB-fanout 16KB latency-paced cache}; do
    n=${#cfgs[@]}
    for k in $(seq 0 $((n-1))); do run_one "${cfgs[$(( (k + t) % n ))]}" $w $t; done
  done
done
