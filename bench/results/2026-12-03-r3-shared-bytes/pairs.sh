#!/usr/bin/env bash
# pairs.sh OUT A B: per-trial delivered msgs/s ratio A/B for each durable workload, and the median.
out=$1 a=$2 b=$3
for w in durable-1p1s-256B-fsync-always durable-1p1s-1KB-fsync-always; do
  rs=()
  for f in "$out"/raw/$w.$a.*.json; do
    t=${f%.json}; t=${t##*.}
    g="$out/raw/$w.$b.$t.json"; [[ -s $g && -s $f ]] || continue
    rs+=("$(jq -n --slurpfile x "$f" --slurpfile y "$g" '$x[0].delivered_msgs_per_s / $y[0].delivered_msgs_per_s' )")
  done
  printf '%s %s/%s: ' "$w" "$a" "$b"
  printf '%.2f ' "${rs[@]}"
  printf '| median %s\n' "$(printf '%s\n' "${rs[@]}" | sort -g | awk '{v[NR]=$1} END {if (NR%2) printf "%.2f", v[(NR+1)/2]; else printf "%.2f", (v[NR/2]+v[NR/2+1])/2}')"
done
