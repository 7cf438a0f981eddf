# registry.run NAME IMAGE PORT DATA — container NAME of IMAGE running, publishing PORT to the
# registry's port 5000, storing under DATA (bound to /var/lib/registry), restarted by the runtime
# (--restart=always). A stopped container with these settings is started; one with other settings
# is removed and created again (its data stays in DATA); so `docker run` never meets a name conflict.
name=$1; img=$2; port=$3; data=$4
insp() { docker inspect --type=container -f "$1" "$name" 2>/dev/null; }
exists=no; same=no
if insp '{{.Id}}' >/dev/null; then
    exists=yes
    if [ "$(insp '{{.Config.Image}}')" = "$img" ] &&
        [ "$(insp '{{json .HostConfig.Binds}}')" = "[\"$data:/var/lib/registry\"]" ] &&
        insp '{{json .HostConfig.PortBindings}}' | grep -Eq "\"HostPort\": ?\"$port\""; then
        same=yes
        [ "$(insp '{{.State.Running}}')" = true ] &&
            done_ "container $name runs $img on port $port with its data in $data"
    fi
fi
needed "container $name: exists $exists, same settings $same, not running"
mkdir -p "$data"
if [ "$same" = yes ]; then
    docker start "$name" >/dev/null
    echo "started container $name"
    exit 0
fi
[ "$exists" = no ] || docker rm -f "$name" >/dev/null
docker run -d --name "$name" --restart=always -p "$port:5000" -v "$data:/var/lib/registry" "$img" >/dev/null
echo "created container $name ($img, port $port, data in $data)"
