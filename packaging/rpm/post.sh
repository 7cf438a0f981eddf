# %post of vnfkeeper: user and group, spool, then enable (not start) the service and the daily
# database backup timer on first install.
systemd-sysusers /usr/lib/sysusers.d/vnfkeeper.conf >/dev/null 2>&1 || :
systemd-tmpfiles --create /usr/lib/tmpfiles.d/vnfkeeper.conf >/dev/null 2>&1 || :
systemctl daemon-reload >/dev/null 2>&1 || :
if [ "$1" -eq 1 ]; then
    systemctl enable vnfkeeper.service >/dev/null 2>&1 || :
    systemctl enable vnfkeeper-backup.timer >/dev/null 2>&1 || :
fi
