# ansible.inventory INVENTORY_DIR HOSTS_SHA256 GROUP_VARS_SHA256 — the kubespray inventory in
# INVENTORY_DIR is exactly the one vnfkeeper generated: `hosts.yaml` and
# `group_vars/all/vnfkeeper.yml`, uploaded whole by the engine before apply (never edited in
# place). A changed inventory voids the records of playbooks run against the old one.
inv=$1; hosts_sha=$2; vars_sha=$3
digest() { if [ -f "$1" ]; then sha256sum "$1" | cut -d' ' -f1; else echo none; fi; }
if [ "$MODE" = check ] && [ "$(digest "$inv/hosts.yaml")" = "$hosts_sha" ] && [ "$(digest "$inv/group_vars/all/vnfkeeper.yml")" = "$vars_sha" ]; then
    done_ "inventory $inv/hosts.yaml is current"
fi
needed "inventory $inv differs from the VNFC rows"
[ "$(digest "$inv/hosts.yaml")" = "$hosts_sha" ] || fail "the uploaded $inv/hosts.yaml does not have the planned content"
[ "$(digest "$inv/group_vars/all/vnfkeeper.yml")" = "$vars_sha" ] || fail "the uploaded group_vars/all/vnfkeeper.yml does not have the planned content"
rm -rf "$inv/.vnfkeeper/done"
echo "inventory $inv/hosts.yaml written"
