#!/usr/bin/env bash
# A local Starling round trip without Kubernetes, with authentication on (the default):
#   1. build the broker and the CLI (release),
#   2. generate a token for user `demo` and write a users document holding only its SHA-256,
#      allowing `demo.>` (docs/security.md),
#   3. start `starling-broker` on its embedded balanced default (self-signed TLS) with that
#      users file,
#   4. as `demo` (a credentials directory with the token): subscribe, publish, and read the
#      messages back; put and get a cache key,
#   5. show that a client without credentials, and `demo` outside its patterns, are refused,
#   6. show a few metrics, then stop the broker with SIGTERM (it drains and exits).
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO=${CARGO:-cargo}
echo "==> building starling-broker and starling (release)"
$CARGO build --release -q -p starling-broker -p starling-cli
BIN="${CARGO_TARGET_DIR:-target}/release"
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

echo "==> a user: a random token for 'demo', and a users document with only its SHA-256"
CREDS="$WORK/credentials"   # laid out like a BrokerUser's Secret: here just `token`
mkdir -m 700 "$CREDS"
TOKEN=$(openssl rand -hex 32)
printf '%s' "$TOKEN" >"$CREDS/token"
HASH=$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1)
cat >"$WORK/users.yaml" <<USERS
version: 1
users:
  - name: demo
    authentication: {type: token, sha256: "$HASH"}
    permissions:
      publish: {allow: ["demo.>"]}
      subscribe: {allow: ["demo.>"]}
      cache_read: {allow: ["demo.>"]}
      cache_write: {allow: ["demo.>"]}
USERS
sed 's/^/    /' "$WORK/users.yaml"

echo "==> starting starling-broker (no config file: balanced profile, self-signed certificate; users from $WORK/users.yaml)"
# The broker reads every STARLING_* variable as a knob and refuses unknown ones: the demo's own
# port variables are not passed on.
env -u STARLING_DEMO_QUIC_PORT -u STARLING_DEMO_HTTP_PORT \
  STARLING_QUIC_LISTEN=$QUIC STARLING_HTTP_LISTEN=$HTTP STARLING_LOG_FORMAT=json \
  STARLING_AUTH_USERS_FILE="$WORK/users.yaml" \
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

ANON=("$BIN/starling" --server "$QUIC" --fingerprint "$FP")
CLI=("${ANON[@]}" --credentials "$CREDS")
echo "==> terminal 1: starling --credentials DIR sub demo.greetings --count 3"
"${CLI[@]}" sub demo.greetings --count 3 >"$WORK/sub.out" &
SUB_PID=$!
# Publish only once the subscription is registered (it would not see earlier messages).
for _ in $(seq 1 100); do
  curl -fsS "http://$HTTP/metrics" | grep -q '^starling_subscriptions 1' && break
  sleep 0.1
done
echo "==> terminal 2: starling --credentials DIR pub demo.greetings ... (3 messages, acked)"
for msg in "hello from starling" "second message" "third and last"; do
  "${CLI[@]}" pub demo.greetings "$msg" --ack
done
wait "$SUB_PID"
echo "    the subscriber printed:"
sed 's/^/      /' "$WORK/sub.out"

echo "==> cache: put demo.greeting (ttl 60s), get it back"
"${CLI[@]}" cache put demo.greeting "hi there" --ttl 60s
echo "    get demo.greeting -> $("${CLI[@]}" cache get demo.greeting)"

echo "==> refusals: no credentials (exit 3), and 'demo' outside its patterns (exit 4)"
# refused EXPECTED_STATUS COMMAND...: runs it, which must fail with that exit status.
refused() {
  local want=$1 rc=0; shift
  "$@" 2>"$WORK/refused.err" >/dev/null || rc=$?
  [[ $rc == "$want" ]] || { echo "expected exit status $want, got $rc"; cat "$WORK/refused.err"; exit 1; }
  echo "    exit $rc: $(cat "$WORK/refused.err")"
}
refused 3 "${ANON[@]}" pub demo.greetings "who am I?" --ack
refused 4 "${CLI[@]}" pub payroll.salaries "not mine" --ack

echo "==> a few metrics from http://$HTTP/metrics"
curl -fsS "http://$HTTP/metrics" | grep -E '^starling_(published_messages_total|delivered_events_total|cache_hits_total|connections_total|auth_users) |^starling_(auth_failures|forbidden)_total\{' | grep -v ' 0$'

echo "==> stopping the broker (SIGTERM: drain, then close)"
kill -TERM "$BROKER_PID"; wait "$BROKER_PID" || true
BROKER_PID=""
echo "done. Next: 'make test', or read README.md for Kubernetes."
