# ansible.group_vars FILE SHA256 — FILE (a group_vars file in the inventory, uploaded whole by
# the engine before apply, never edited in place) has exactly the planned content.
file=$1; sha=$2
digest() { if [ -f "$1" ]; then sha256sum "$1" | cut -d' ' -f1; else echo none; fi; }
[ "$MODE" != check ] || [ "$(digest "$file")" != "$sha" ] || done_ "$file is current"
needed "$file differs from the planned content"
[ "$(digest "$file")" = "$sha" ] || fail "the uploaded $file does not have the planned content"
echo "$file written"
