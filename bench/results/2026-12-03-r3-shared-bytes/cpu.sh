#!/usr/bin/env bash
# cpu.sh OUT: CPU µs per published message of the three brokers (durable-store.tsv), per trial and median, per system and workload.
awk -F'\t' 'NR>1 && $6 ~ /cpu_s_3_brokers/ { match($6, /cpu_s_3_brokers=[0-9.]+/); c=substr($6, RSTART+16, RLENGTH-16); k=$1" "$2; v[k]=v[k] sprintf(" %.1f", c*1e6/$5) } END { for (k in v) print k":"v[k] }' "$1/durable-store.tsv" | sort |
while IFS=: read -r k vals; do
  med=$(tr ' ' '\n' <<<"$vals" | grep . | sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}')
  echo "$k:$vals | median $med"
done
