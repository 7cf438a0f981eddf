# nfs.exports EXPORTS_FILE OWNER BLOCK DIR... — exactly the requested exports: the block between
# "# BEGIN vnfkeeper OWNER" and "# END vnfkeeper OWNER" in EXPORTS_FILE is rewritten whole (other
# lines are kept; the file is replaced atomically), each DIR exists, and `exportfs` serves each DIR.
file=$1; owner=$2; block=$3; shift 3
begin="# BEGIN vnfkeeper $owner"; end="# END vnfkeeper $owner"
current=$(awk -v b="$begin" -v e="$end" '$0==e{on=0} on{print} $0==b{on=1}' "$file" 2>/dev/null || true)
served() { list=$(exportfs 2>/dev/null || true); for d in "$@"; do printf '%s\n' "$list" | awk '{print $1}' | grep -qxF "$d" || return 1; done; }
if [ "$current" = "$block" ] && served "$@"; then
    done_ "$file holds exactly the $# requested exports and exportfs serves them"
fi
needed "exports differ from the request or are not served"
for d in "$@"; do mkdir -p "$d"; chown nobody:nogroup "$d" 2>/dev/null || chown nobody "$d"; done
{ awk -v b="$begin" -v e="$end" '$0==b{skip=1} !skip{print} $0==e{skip=0}' "$file" 2>/dev/null || true
  printf '%s\n%s\n%s\n' "$begin" "$block" "$end"; } | replace_file "$file"
exportfs -ra
served "$@" || fail "exportfs does not list every export after exportfs -ra"
echo "exports written and served: $*"
