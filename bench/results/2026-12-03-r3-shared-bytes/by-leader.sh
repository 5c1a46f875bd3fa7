#!/usr/bin/env bash
# by-leader.sh OUT...: for each durable workload and Starling R3 system, the trials grouped by
# where the topic's leader was (n0: the broker the client is on; other: n1 or n2, every publish
# forwarded once), with the delivered msgs/s (raw/*.json) and the CPU µs per published message
# of the three brokers (durable-store.tsv) of each trial, and their medians. JetStream's trials
# are listed for reference (its leader placement is not recorded).
med() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }
for out in "$@"; do
  awk -F'\t' -v out="$out" 'NR>1 { lead="-"; cpu=""; if (match($6, /leader=n[0-9]/)) lead=substr($6, RSTART+7, 2);
      if (match($6, /cpu_s_3_brokers=[0-9.]+/)) cpu=sprintf("%.1f", substr($6, RSTART+16, RLENGTH-16)*1e6/$5);
      print out"\t"$1"\t"$2"\t"$3"\t"lead"\t"cpu }' "$out/durable-store.tsv"
done | while IFS=$'\t' read -r out w sys trial lead cpu; do
  d=$(jq -r '.delivered_msgs_per_s' "$out/raw/$w.$sys.$trial.json" 2>/dev/null)
  g=other; [[ $lead == n0 ]] && g=n0; [[ $sys == jetstream* ]] && g=all
  printf '%s\t%s\t%s\t%.0f\t%s\n' "$w" "$sys" "$g" "$d" "$cpu"
done | sort > /tmp/by-leader.$$
cut -f1-3 /tmp/by-leader.$$ | sort -u | while IFS=$'\t' read -r w sys g; do
  rows=$(awk -F'\t' -v w="$w" -v s="$sys" -v g="$g" '$1==w && $2==s && $3==g' /tmp/by-leader.$$)
  n=$(wc -l <<<"$rows")
  dm=$(cut -f4 <<<"$rows" | med); cm=$(cut -f5 <<<"$rows" | grep . | med)
  printf '%s | %s | leader %s | n=%s | delivered median %s (%s) | cpu µs/msg median %s (%s)\n' "$w" "$sys" "$g" "$n" "$dm" \
    "$(cut -f4 <<<"$rows" | sort -g | tr '\n' ' ' | sed 's/ $//')" "$cm" "$(cut -f5 <<<"$rows" | sort -g | tr '\n' ' ' | sed 's/ $//')"
done
rm -f /tmp/by-leader.$$
