# registry.image IMAGE TAR — the registry image IMAGE present in the runtime: loaded from TAR (the
# package's image_path, uploaded by the engine) when TAR is not empty, else pulled. An image the
# tar holds under another tag is tagged IMAGE.
img=$1; tar=$2
if docker inspect --type=image "$img" >/dev/null 2>&1; then
    done_ "image $img is present"
fi
needed "image $img is missing"
if [ -n "$tar" ]; then
    out=$(docker load -i "$tar") || fail "docker load -i $tar failed"
    loaded=$(printf '%s\n' "$out" | sed -n 's/^Loaded image: //p' | head -n 1)
    [ -n "$loaded" ] || fail "$tar holds no tagged image (docker load printed: $out)"
    [ "$loaded" = "$img" ] || docker tag "$loaded" "$img"
else
    docker pull "$img" >/dev/null
fi
docker inspect --type=image "$img" >/dev/null 2>&1 || fail "image $img is still missing"
echo "image $img present"
