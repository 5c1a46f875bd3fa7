#!/usr/bin/env bash
# A local Starling round trip with no configuration at all:
#   1. build the broker and the CLI (release),
#   2. start `starling-broker` on its embedded balanced default (self-signed TLS),
#   3. subscribe, publish, and read the messages back,
#   4. put and get a cache key,
#   5. show a few metrics, then stop the broker with SIGTERM (it drains and exits).
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO=${CARGO:-cargo}
echo "==> building starling-broker and starling (release)"
$CARGO build --release -q -p starling-broker -p starling-cli
BIN=target/release
WORK=$(mktemp -d)
BROKER_PID=""
cleanup() {
  if [[ -n "$BROKER_PID" ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
    kill -TERM "$BROKER_PID"; wait "$BROKER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

QUIC=127.0.0.1:${STARLING_DEMO_QUIC_PORT:-7400}
HTTP=127.0.0.1:${STARLING_DEMO_HTTP_PORT:-9400}
echo "==> starting starling-broker (no config file: balanced profile, self-signed certificate)"
STARLING_QUIC_LISTEN=$QUIC STARLING_HTTP_LISTEN=$HTTP STARLING_LOG_FORMAT=json \
  "$BIN/starling-broker" >"$WORK/broker.log" 2>&1 &
BROKER_PID=$!
for _ in $(seq 1 100); do
  curl -fsS "http://$HTTP/readyz" >/dev/null 2>&1 && break
  kill -0 "$BROKER_PID" 2>/dev/null || { cat "$WORK/broker.log"; exit 1; }
  sleep 0.1
done
curl -fsS "http://$HTTP/readyz" >/dev/null || { echo "broker never became ready"; cat "$WORK/broker.log"; exit 1; }
FP=$(sed -n 's/.*"fingerprint":"\([0-9A-F:]*\)".*/\1/p' "$WORK/broker.log" | head -n1)
echo "    ready on quic://$QUIC, http://$HTTP; certificate SHA-256 $FP"

CLI=("$BIN/starling" --server "$QUIC" --fingerprint "$FP")
echo "==> terminal 1: starling sub demo --count 3"
"${CLI[@]}" sub demo --count 3 >"$WORK/sub.out" &
SUB_PID=$!
# Publish only once the subscription is registered (it would not see earlier messages).
for _ in $(seq 1 100); do
  curl -fsS "http://$HTTP/metrics" | grep -q '^starling_subscriptions 1' && break
  sleep 0.1
done
echo "==> terminal 2: starling pub demo ... (3 messages, acked)"
for msg in "hello from starling" "second message" "third and last"; do
  "${CLI[@]}" pub demo "$msg" --ack
done
wait "$SUB_PID"
echo "    the subscriber printed:"
sed 's/^/      /' "$WORK/sub.out"

echo "==> cache: put greeting (ttl 60s), get it back"
"${CLI[@]}" cache put greeting "hi there" --ttl 60s
echo "    get greeting -> $("${CLI[@]}" cache get greeting)"

echo "==> a few metrics from http://$HTTP/metrics"
curl -fsS "http://$HTTP/metrics" | grep -E '^starling_(published_messages_total|delivered_events_total|cache_hits_total|connections_total) '

echo "==> stopping the broker (SIGTERM: drain, then close)"
kill -TERM "$BROKER_PID"; wait "$BROKER_PID" || true
BROKER_PID=""
echo "done. Next: 'make test', or read README.md for Kubernetes."
