-- SSH host keys of hosts outside any VNF that vnfkeeper logs in to (the Ansible server
-- a kubespray INSTANTIATE names by `ansible.ip_address`). Pinned at first contact (trust on first
-- use: such a host has no console vnfkeeper can read) and checked exactly afterwards, like
-- `vnfc.host_key`. One row per address; `host-key forget` does not reach them yet.
CREATE TABLE external_host_key (
    address     TEXT PRIMARY KEY,                 -- IP address as written in the request
    host_key    TEXT NOT NULL,                    -- OpenSSH public key line
    fingerprint TEXT NOT NULL,                    -- SHA256:… of host_key
    pinned_at   TEXT NOT NULL                     -- RFC 3339
);
