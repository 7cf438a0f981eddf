# %postun of vnfkeeper: reload units; on upgrade restart a running service. RPM has no purge:
# the database, spool and user stay after `rpm -e` (remove /var/lib/vnfkeeper and
# /var/spool/vnfkeeper by hand to drop them).
systemctl daemon-reload >/dev/null 2>&1 || :
if [ "$1" -ge 1 ]; then
    systemctl try-restart vnfkeeper.service >/dev/null 2>&1 || :
fi
