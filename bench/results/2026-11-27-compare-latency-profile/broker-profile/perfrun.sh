#!/usr/bin/env bash
# perfrun.sh LAYOUT PROFILE TAG -- bench args : ol run with perf stat + perf record on the broker
layout=$1; prof=$2; tag=$3; shift 3
[ -n "${NOSTAT:-}" ] || ( sleep 2.2; pid=$(pgrep -f target/dist/starling-broker | head -1); perf stat -e task-clock,context-switches,cpu-migrations -e 'syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendmmsg,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_recvmsg,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait' -p $pid -o /tmp/ol/$tag.stat -- sleep 2 ) &
( sleep 2.2; pid=$(pgrep -f target/dist/starling-broker | head -1); perf record -e cpu-clock -F 1999 ${PERFG:-} -p $pid -o /tmp/ol/$tag.perf -- sleep 2 >/dev/null 2>&1 ) &
./ol.sh $layout $prof /tmp/ol/$tag.json "$@"
wait
