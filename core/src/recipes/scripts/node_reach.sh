# node.reach — nothing to change: vnfkeeper logs in (and, at first contact, pins the host key it
# verified) so that the Ansible server's known_hosts can be written from pinned keys.
done_ "reachable as $(id -un) on $(hostname)"
