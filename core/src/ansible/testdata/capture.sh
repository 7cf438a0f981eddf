#!/bin/sh
# Captures failing.jsonl and clean.jsonl: Debian 12's ansible-playbook (ansible-core 2.14 with the
# `ansible` package's ansible.posix 1.5.4) runs failing.yml and clean.yml against hosts.yaml with
# the JSON-lines stdout callback, from a copy in a temporary directory (so no worktree path is
# recorded). tests/engine/engine_ansible_events.rs runs the same playbooks at test time and checks
# that the events it reads from a fresh run match these captures.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/hosts.yaml" "$here/failing.yml" "$here/clean.yml" "$tmp/"
cd "$tmp"
for book in failing clean; do
    ANSIBLE_STDOUT_CALLBACK=ansible.posix.jsonl ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=False \
        ansible-playbook -i hosts.yaml "$book.yml" >"$here/$book.jsonl" || true
done
