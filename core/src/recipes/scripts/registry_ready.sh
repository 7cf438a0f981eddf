# registry.ready PORT WAIT — the registry answers GET /v2/ on 127.0.0.1:PORT with 200 (or 401 when
# it asks for credentials: it is up); apply polls once a second for at most WAIT seconds.
port=$1; wait=$2; url="http://127.0.0.1:$port/v2/"
probe() { code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$url" 2>/dev/null) || code=000; }
probe
case $code in 200 | 401) done_ "GET $url answered $code" ;; esac
needed "GET $url answered $code (000: no connection, or no answer within 5 s)"
end=$(($(date +%s) + wait))
while [ "$(date +%s)" -lt "$end" ]; do
    sleep 1
    probe
    case $code in 200 | 401) echo "GET $url answered $code"; exit 0 ;; esac
done
fail "the registry did not answer GET $url within $wait s (last status $code; 000: no connection, or no answer within 5 s)"
