#!/bin/bash
# testbed host init: PID 1 of a host's PID namespace (not systemd). Supervises the host's sshd and
# reaps orphans. Signals from the farm: USR1 = start sshd, USR2 = stop sshd, TERM = stop and exit.
# /run/testbed/sshd.pid holds the sshd PID (as seen inside the host) while sshd runs.
cd /
sshd_pid=
start_sshd() {
  if [ -n "$sshd_pid" ] && kill -0 "$sshd_pid" 2>/dev/null; then return; fi
  /usr/sbin/sshd -D -f /etc/ssh/testbed_sshd_config -E /var/log/testbed/sshd.log </dev/null &
  sshd_pid=$!
  echo "$sshd_pid" > /run/testbed/sshd.pid
}
stop_sshd() {
  # Forget the PID before waiting: a USR1 handled during the wait must start a new sshd, not
  # mistake the exiting one for a running sshd (the farm sends USR1 once port 22 refuses).
  local p=$sshd_pid
  sshd_pid=
  rm -f /run/testbed/sshd.pid
  if [ -n "$p" ]; then kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; fi
}
trap start_sshd USR1
trap stop_sshd USR2
trap 'stop_sshd; exit 0' TERM INT
start_sshd
while :; do
  sleep 3600 & sp=$!
  wait "$sp"
  kill "$sp" 2>/dev/null
done
