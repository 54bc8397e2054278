#!/usr/bin/env bash
# nmt serve behind nginx with TLS, as docs/serving.md ("Exposing it") sets it up: trains a small
# model on the toy corpus (or takes MODEL_DIR), makes a self-signed certificate for localhost,
# starts nmt serve on a free port with an API key (--api-key-file) and an access log, and nginx on
# another with scripts/nginx/nmt.conf.template, everything they write inside one temporary folder.
# Then, through nginx: a translation is the one the server gives directly, a request without the
# key (or with a wrong one) gets 401, a 2 MiB body gets 413 from nginx without reaching the server,
# the server's access log has nginx as the client and the client in forwarded_for, plain HTTP to
# the TLS port is refused (nginx's 400, or no answer), and /health answers 200 without a key.
# Skipped, saying so, with exit status 77 when nginx, openssl, curl or python3 is missing
# (scripts/setup.sh installs them as root).
# Usage: scripts/nginx_check.sh [MODEL_DIR]
# Needs scripts/build.sh nmt.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
nginx="$(command -v nginx || true)"
[ -z "$nginx" ] && [ -x /usr/sbin/nginx ] && nginx=/usr/sbin/nginx  # not on a normal user's PATH
missing=""
[ -n "$nginx" ] || missing="nginx"
for tool in openssl curl python3; do
  command -v "$tool" > /dev/null || missing="${missing:+$missing, }$tool"
done
if [ -n "$missing" ]; then
  echo "nginx check: skipped (not installed: $missing; scripts/setup.sh installs them as root)"
  exit 77
fi
work="$(mktemp -d)"
server=""
proxy=""
# stop PID: SIGTERM, and waits for it to end, however it ends.
stop() {
  kill -TERM "$1" 2> /dev/null || true
  wait "$1" 2> /dev/null || true
}
stop_all() {
  [ -z "$proxy" ] || stop "$proxy"
  [ -z "$server" ] || stop "$server"
  rm -rf "$work"
}
trap stop_all EXIT
fail() {
  echo "nginx check: FAILED: $*" >&2
  exit 1
}

source "$root/scripts/serve_helpers.sh"
model="${1:-}"
if [ -z "$model" ]; then
  model="$work/model"
  train_toy_model "$build/nmt" "$model"
fi

# A certificate for localhost and 127.0.0.1, signed by itself: clients trust it by --cacert.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$work/key.pem" -out "$work/cert.pem" \
  > "$work/openssl.log" 2>&1 || { cat "$work/openssl.log" >&2; fail "openssl could not make a certificate"; }
echo "nginx check: self-signed certificate for localhost and 127.0.0.1"

# The API key: 64 hex characters in a file only its owner reads. curl takes the header from a file
# too, so that the key is on no command line.
(umask 077 && openssl rand -hex 32 > "$work/api_key" && echo "Authorization: Bearer $(cat "$work/api_key")" > "$work/auth")
echo "Authorization: Bearer $(openssl rand -hex 32)" > "$work/wrong_auth"

start_server "$work/serve.log" "$build/nmt" --model "$model" --threads 1 \
  --api-key-file "$work/api_key" --access-log "$work/access.log"

# nginx in the foreground of this script (daemon off), its pid, logs and temporary files in $work.
# As root its workers run as this user (they write the temporary files); as a normal user nginx
# runs as that user and takes no `user` line.
user_line=""
[ "$(id -u)" -eq 0 ] && user_line="user $(id -un) $(id -gn);"
cat > "$work/nginx.conf" << EOF
$user_line
daemon off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log;
events {
    worker_connections 64;
}
http {
    access_log $work/nginx_access.log;
    client_body_temp_path $work/client_body;
    proxy_temp_path $work/proxy;
    fastcgi_temp_path $work/fastcgi;
    uwsgi_temp_path $work/uwsgi;
    scgi_temp_path $work/scgi;
    include $work/nmt.conf;
}
EOF
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
tls_port=""
for _ in 1 2 3 4 5; do  # another program may take the free port first
  candidate="$(free_port)"
  sed -e "s|@UPSTREAM_PORT@|$port|g" -e "s|@LISTEN@|127.0.0.1:$candidate|g" -e "s|@SERVER_NAME@|localhost|g" \
    -e "s|@CERT@|$work/cert.pem|g" -e "s|@KEY@|$work/key.pem|g" "$root/scripts/nginx/nmt.conf.template" > "$work/nmt.conf"
  if grep -v '^ *#' "$work/nmt.conf" | grep -q '@[A-Z_]*@'; then
    fail "scripts/nginx/nmt.conf.template has a placeholder this script does not fill: $(grep -v '^ *#' "$work/nmt.conf" | grep -o '@[A-Z_]*@' | head -1)"
  fi
  : > "$work/error.log"
  "$nginx" -p "$work/" -c "$work/nginx.conf" -e "$work/error.log" > "$work/nginx.out" 2>&1 &
  proxy=$!
  for _ in $(seq 100); do
    if curl -s -o /dev/null --max-time 2 --cacert "$work/cert.pem" --resolve "localhost:$candidate:127.0.0.1" \
      "https://localhost:$candidate/health"; then
      tls_port="$candidate"
      break 2
    fi
    kill -0 "$proxy" 2> /dev/null || break
    sleep 0.1
  done
  stop "$proxy"
  proxy=""
  grep -q 'Address already in use' "$work/nginx.out" "$work/error.log" || break
done
if [ -z "$tls_port" ]; then
  cat "$work/nginx.out" "$work/error.log" >&2
  fail "nginx did not start, or did not answer over TLS"
fi
echo "nginx check: nginx answers over TLS on 127.0.0.1:$tls_port, nmt serve on 127.0.0.1:$port"

url="https://localhost:$tls_port"
tls=(--cacert "$work/cert.pem" --resolve "localhost:$tls_port:127.0.0.1")
json=(-H 'Content-Type: application/json')
# request FILE CURL_ARGS...: the answer's body into $work/FILE, its status into `status`.
request() {
  local file="$1"
  shift
  status="$(curl -sS --max-time 20 -o "$work/$file" -w '%{http_code}' "$@" 2> "$work/$file.err")" ||
    status="no answer ($(head -c 200 "$work/$file.err"))"
}

body='{"text": ["a wolf hears your shop from a hill ."]}'
request direct -H @"$work/auth" "${json[@]}" -d "$body" "http://127.0.0.1:$port/translate"
[ "$status" = 200 ] || fail "POST /translate straight to nmt serve: $status, not 200: $(head -c 300 "$work/direct")"
request proxied "${tls[@]}" -H @"$work/auth" "${json[@]}" -d "$body" "$url/translate"
[ "$status" = 200 ] || fail "POST /translate through nginx: $status, not 200: $(head -c 300 "$work/proxied")"
cmp -s "$work/direct" "$work/proxied" ||
  fail "through nginx the translation differs: $(head -c 300 "$work/proxied"), straight: $(head -c 300 "$work/direct")"
grep -q '"translations"' "$work/proxied" || fail "the answer has no translations: $(head -c 300 "$work/proxied")"
echo "nginx check: (a) POST /translate over TLS through nginx answers what nmt serve answers directly"

request no_key "${tls[@]}" "${json[@]}" -d "$body" "$url/translate"
[ "$status" = 401 ] || fail "POST /translate through nginx without the key: $status, not 401"
request wrong_key "${tls[@]}" -H @"$work/wrong_auth" "${json[@]}" -d "$body" "$url/translate"
[ "$status" = 401 ] || fail "POST /translate through nginx with a wrong key: $status, not 401"
echo "nginx check: (b) POST /translate through nginx without the key, or with a wrong one: 401"

head -c $((2 << 20)) /dev/zero | tr '\0' ' ' > "$work/large.json"
request large "${tls[@]}" -H @"$work/auth" "${json[@]}" --data-binary @"$work/large.json" "$url/translate"
[ "$status" = 413 ] || fail "a 2 MiB body through nginx: $status, not 413"
grep -q '413 Request Entity Too Large' "$work/large" || fail "the 413 for a 2 MiB body is not nginx's own page: $(head -c 300 "$work/large")"
echo "nginx check: (c) a 2 MiB body gets 413 from nginx (client_max_body_size 1m)"

# The server writes a request's line once it has answered it: at least five lines, those of the
# /health nginx was first asked for, the two translations and the two refusals of (b).
for _ in $(seq 50); do
  [ -f "$work/access.log" ] && [ "$(wc -l < "$work/access.log")" -ge 5 ] && break
  sleep 0.1
done
[ -f "$work/access.log" ] || fail "nmt serve wrote no access log ($work/access.log)"
python3 - "$work/access.log" << 'EOF' || fail "the access log of nmt serve is not as expected"
import json, sys

keys = {"time", "method", "path", "status", "request_bytes", "answer_bytes", "seconds", "client", "forwarded_for"}
lines = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
for line in lines:
    if not keys <= line.keys():
        sys.exit(f"a line lacks {sorted(keys - line.keys())}: {line}")
    if line["request_bytes"] > 1 << 20 or line["status"] == 413:
        sys.exit(f"the 2 MiB body reached nmt serve: {line}")
translations = [l for l in lines if (l["method"], l["path"], l["status"]) == ("POST", "/translate", 200)]
if len(translations) != 2:
    sys.exit(f"{len(translations)} lines of POST /translate answered 200, not 2 (straight, then through nginx)")
direct, proxied = translations
if (direct["client"], direct["forwarded_for"]) != ("127.0.0.1", ""):
    sys.exit(f"the direct request's line: client {direct['client']!r}, forwarded_for {direct['forwarded_for']!r}")
if (proxied["client"], proxied["forwarded_for"]) != ("127.0.0.1", "127.0.0.1"):
    sys.exit(f"the proxied request's line: client {proxied['client']!r} (nginx: 127.0.0.1), "
             f"forwarded_for {proxied['forwarded_for']!r} (curl: 127.0.0.1)")
EOF
echo "nginx check: (d) the access log has the proxied request from client 127.0.0.1 forwarded for 127.0.0.1, and no 2 MiB body"

request plain --resolve "localhost:$tls_port:127.0.0.1" "http://localhost:$tls_port/health"
case "$status" in
  400) grep -q 'plain HTTP request was sent to HTTPS port' "$work/plain" ||
         fail "plain HTTP to the TLS port: 400 without nginx's reason: $(head -c 300 "$work/plain")" ;;
  "no answer"*) ;;
  *) fail "plain HTTP to the TLS port: $status, not refused" ;;
esac
echo "nginx check: (e) plain HTTP to the TLS port is refused ($status)"

request health "${tls[@]}" "$url/health"
[ "$status" = 200 ] || fail "GET /health through nginx without a key: $status, not 200"
echo "nginx check: (f) GET /health through nginx without a key: 200"

kill -TERM "$server"
wait "$server" || fail "nmt serve did not exit cleanly after SIGTERM"
server=""
kill -QUIT "$proxy"  # nginx's graceful stop
wait "$proxy" || fail "nginx did not exit cleanly after SIGQUIT"
proxy=""
echo "nginx check: passed"
