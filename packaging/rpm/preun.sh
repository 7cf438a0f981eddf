# %preun of vnfkeeper: on erase (not upgrade) stop and disable the service.
if [ "$1" -eq 0 ]; then
    systemctl disable --now vnfkeeper.service >/dev/null 2>&1 || :
fi
