#!/usr/bin/env bash
# mturun.sh BUF PAIRS MTU_A MTU_B : interleaved A B B A ... runs of quic-limit
cd /work/main
out=bench/results/2026-11-27-mtu/buf$1-$3-vs-$4; mkdir -p $out
buf=$1; pairs=$2; a=$3; b=$4
bufopt=(); [[ $buf != def ]] && bufopt=(--socket-buffer $buf)
echo "batch buf=$buf $a vs $b: $(uptime)" | tee -a $out/../loadavg.txt
for i in $(seq 1 $pairs); do
  if (( i % 2 )); then order="$a $b"; else order="$b $a"; fi
  for m in $order; do
    name=mtu$m-p$i
    /tmp/cb/quiet target/release/starling-bench quic-limit --duration 3s --max-mtu $m "${bufopt[@]}" \
      --name $name --json $out/$name.json > $out/$name.txt 2> >(grep -v pgrep | grep -v 'pgrep -f' > $out/$name.err)
    sleep 0.5
    printf '%s %s\n' "$name" "$(grep -o 'bulk .*MB/s' $out/$name.txt) | $(grep -o 'current_mtu [0-9]*.*black holes' $out/$name.err | cut -c1-200)"
  done
done
