# %preun of vnfkeeper: on erase (not upgrade) stop and disable the service and the backup timer.
if [ "$1" -eq 0 ]; then
    systemctl disable --now vnfkeeper.service >/dev/null 2>&1 || :
    systemctl disable --now vnfkeeper-backup.timer >/dev/null 2>&1 || :
fi
