#!/bin/sh
# testbed time compression for sleep(1) on hosts of the Ubuntu 20.04 profile
# (/usr/local/bin/sleep, ahead of /usr/bin/sleep on every PATH sshd, sudo and su set): waits one
# tenth of the requested time. Scripts written for real nodes wait fixed times for what they
# started to settle (Tacker's install_k8s_cluster.sh: 30 s after installing kubelet, 20 s after
# `kubeadm init`, 60 s for pods); on these hosts kubeadm, kubelet, the API and apt are stand-ins
# that are done when their command returns, so a tenth keeps the order and the overlap of every
# wait and drops the idle time. Operands as coreutils sleep takes them (NUMBER[smhd], summed);
# anything else (`infinity`, a malformed operand, options) goes to the real sleep unchanged.
scaled=$(awk 'BEGIN {
    t = 0
    for (i = 1; i < ARGC; i++) {
        a = ARGV[i]; u = substr(a, length(a)); n = a
        if (u ~ /[smhd]/) n = substr(a, 1, length(a) - 1); else u = "s"
        if (n !~ /^([0-9]+\.?[0-9]*|\.[0-9]+)$/) exit 1
        t += n * (u == "s" ? 1 : u == "m" ? 60 : u == "h" ? 3600 : 86400)
    }
    if (ARGC < 2) exit 1
    printf "%.3f", t / 10
}' "$@") || exec /usr/bin/sleep "$@"
exec /usr/bin/sleep "$scaled"
