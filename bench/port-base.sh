#!/usr/bin/env bash
# bench/port-base.sh COUNT: print a random loopback port P such that P .. P+COUNT-1 lie below
# the kernel's ephemeral range (net.ipv4.ip_local_port_range) and at or above 20000, away
# from the broker's default ports. A port inside the ephemeral range can be taken at any
# moment by an outgoing connection of the load programs, and a server that cannot bind it
# fails its run; below the range only a listener can hold it.
set -euo pipefail
count=${1:?usage: port-base.sh COUNT}
[[ $count =~ ^[1-9][0-9]*$ ]] || { echo "port-base.sh: COUNT must be a positive integer" >&2; exit 2; }
low=20000
ephemeral_low=32768
if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
    read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range
fi
span=$(( ephemeral_low - low - count ))
if (( span < 1 )); then
    echo "port-base.sh: no room for $count ports between $low and the ephemeral range at $ephemeral_low" >&2
    exit 1
fi
echo $(( low + RANDOM % span ))
