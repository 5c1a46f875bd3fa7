#!/usr/bin/env bash
# Writes a self-signed ECDSA P-256 certificate for localhost / 127.0.0.1 with
# openssl, used by both the Starling broker and nats-server in bench/compare.
# Usage: bench/tls.sh DIR   → DIR/cert.pem, DIR/key.pem (PKCS#8)
set -euo pipefail
dir=${1:?usage: bench/tls.sh DIR}
mkdir -p "$dir"
if [[ -s $dir/cert.pem && -s $dir/key.pem ]]; then exit 0; fi
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/key.pem" -out "$dir/cert.pem" -days 30 -subj "/CN=localhost" \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -addext "basicConstraints=critical,CA:FALSE" 2>/dev/null
