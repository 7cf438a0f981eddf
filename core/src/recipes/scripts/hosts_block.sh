# trust.hosts | k8s.hosts FILE OWNER BLOCK — host lines owned by OWNER: the block between
# "# BEGIN vnfkeeper OWNER" and "# END vnfkeeper OWNER" in FILE (/etc/hosts) is exactly BLOCK,
# rewritten whole (other lines kept, the file replaced atomically), never appended to; a node
# already holding it is left byte-identical.
file=$1; owner=$2; block=$3
begin="# BEGIN vnfkeeper $owner"; end="# END vnfkeeper $owner"
current=$(awk -v b="$begin" -v e="$end" '$0==e{on=0} on{print} $0==b{on=1}' "$file" 2>/dev/null || true)
blocks=$(grep -cxF "$begin" "$file" 2>/dev/null || true)
[ "$current" = "$block" ] && [ "$blocks" = 1 ] && done_ "$file holds the host lines of $owner"
needed "$file: the host lines of $owner differ"
{ awk -v b="$begin" -v e="$end" '$0==b{skip=1} !skip{print} $0==e{skip=0}' "$file" 2>/dev/null || true
  printf '%s\n%s\n%s\n' "$begin" "$block" "$end"; } | replace_file "$file"
echo "host lines of $owner written to $file"
