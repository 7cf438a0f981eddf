# ansible.playbook KUBESPRAY_ROOT INVENTORY_DIR PLAYBOOK RECORD LIMIT [EXTRA_VAR...] — PLAYBOOK
# (relative to KUBESPRAY_ROOT) has run to success against the inventory as it is now: a record
# `INVENTORY_DIR/.vnfkeeper/done/RECORD` holds the digest of the hosts.yaml it ran with. LIMIT
# (empty: all hosts) is given to `--limit`; each EXTRA_VAR `k=v` to `-e`.
# Host keys are checked against INVENTORY_DIR/known_hosts (written by the engine from the keys it
# pinned); the nodes' passwords come from INVENTORY_DIR/.vnfkeeper/credentials.yml (0600, uploaded
# by the engine just before apply), which this script removes whatever happens, and which a check
# removes too if an interrupted run left it behind. Ansible's output goes to stdout as JSON lines
# (the stdout callback ansible.posix.jsonl, checked to be installed before the run); the engine
# reads its events and play recap. SSH connections are shared within the run only.
# One run per inventory at a time: check and apply hold INVENTORY_DIR/.vnfkeeper/lock (flock,
# util-linux), so a run that outlived its client (the daemon killed, the SSH connection gone)
# is waited for — it would otherwise remove the credentials of the run after it and drive the
# same nodes at the same time — and its record then decides the check.
root=$1; inv=$2; book=$3; record=$4; limit=$5; shift 5
state=$inv/.vnfkeeper
creds=$state/credentials.yml
command -v flock >/dev/null 2>&1 || fail "flock (util-linux) is missing on the Ansible server"
mkdir -p "$state" || fail "cannot create $state"
exec 9>"$state/lock" || fail "cannot open $state/lock"
flock 9 || fail "cannot lock $state/lock"
digest=$(sha256sum "$inv/hosts.yaml" 2>/dev/null | cut -d' ' -f1) || digest=none
if [ "$MODE" = check ]; then
    rm -f "$creds"
    if [ -f "$state/done/$record" ] && [ "$(cat "$state/done/$record")" = "$digest" ]; then
        done_ "$book ran against the current inventory"
    fi
    needed "$book ($record) against inventory $digest"
fi
# SSH connections are multiplexed within this run only: a control socket kept from an earlier run
# would reach a node whose sshd is gone, or a rebuilt server at the same address.
cp_dir=$(mktemp -d "${TMPDIR:-/tmp}/vnfkeeper-ssh.XXXXXX") || fail "cannot create a control socket directory"
trap 'rm -f "$creds"; rm -rf "$cp_dir"' EXIT
trap 'rm -f "$creds"; rm -rf "$cp_dir"; exit 143' HUP INT TERM
[ -f "$creds" ] || fail "$creds is missing"
[ -f "$root/$book" ] || fail "$root/$book does not exist"
[ -f "$inv/known_hosts" ] || fail "$inv/known_hosts is missing"
n=$#
for e do set -- "$@" -e "$e"; done
shift "$n"
if [ -n "$limit" ]; then set -- "$@" --limit "$limit"; fi
cd "$root"
# The JSON-lines callback comes with the collection ansible.posix (kubespray's own dependency).
ansible-doc -t callback -j ansible.posix.jsonl 2>/dev/null | grep -q '"ansible.posix.jsonl"' ||
    fail "ansible-playbook has no stdout callback ansible.posix.jsonl: install the collection ansible.posix (Debian's package ansible, pip's ansible bundle, or ansible-galaxy collection install ansible.posix)"
rc=0
ANSIBLE_HOST_KEY_CHECKING=True \
ANSIBLE_SSH_ARGS="-o ControlMaster=auto -o ControlPersist=30s -o StrictHostKeyChecking=yes -o UserKnownHostsFile=$inv/known_hosts" \
ANSIBLE_SSH_CONTROL_PATH_DIR=$cp_dir \
ANSIBLE_STDOUT_CALLBACK=ansible.posix.jsonl \
ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 ANSIBLE_RETRY_FILES_ENABLED=False \
    ansible-playbook -i "$inv/hosts.yaml" -e "@$creds" "$@" "$book" 9>&- || rc=$?
if [ "$rc" -eq 0 ]; then
    mkdir -p "$state/done"
    printf '%s\n' "$digest" >"$state/done/$record"
    echo "$book done"
fi
exit "$rc"
