# A throwaway Matrix homeserver (Synapse) for the Matrix backend's tests and the Matrix demo.
# Source it after common.sh. Nothing here touches the network beyond PyPI (the first install) and
# 127.0.0.1; the server never federates.
#
#   chatvault_synapse_install            the virtual environment (cached; idempotent, offline after
#                                        the first run): sets CHATVAULT_SYNAPSE_PYTHON
#   chatvault_synapse_start DIR          writes a config in DIR (a fresh private directory), starts
#                                        the server on a free port of 127.0.0.1 and waits until it
#                                        answers: sets CHATVAULT_SYNAPSE_URL, CHATVAULT_SYNAPSE_SECRET
#                                        (the registration shared secret), CHATVAULT_SYNAPSE_PID
#   chatvault_synapse_stop               ends the server started above, by its PID
#
# The version is pinned so every machine tests against the same server; the environment lives in
# $XDG_CACHE_HOME/chatvault (or ~/.cache/chatvault), outside any clone, so a fresh clone reuses it.

CHATVAULT_SYNAPSE_VERSION=1.163.2

chatvault_synapse_install() {
    local cache=${XDG_CACHE_HOME:-$HOME/.cache}/chatvault
    local venv=$cache/synapse-$CHATVAULT_SYNAPSE_VERSION
    if [ -x "$venv/bin/python" ] && [ -f "$venv/.installed" ]; then
        CHATVAULT_SYNAPSE_PYTHON=$venv/bin/python
        export CHATVAULT_SYNAPSE_PYTHON
        return 0
    fi
    command -v python3 >/dev/null 2>&1 || chatvault_die "python3 is missing (Scripts/setup installs it)"
    mkdir -p "$cache"
    rm -rf "$venv.partial"
    echo "synapse: installing matrix-synapse $CHATVAULT_SYNAPSE_VERSION into $venv (once, about a minute)" >&2
    python3 -m venv "$venv.partial" >&2 || chatvault_die "python3 -m venv failed (is python3-venv installed?)"
    "$venv.partial/bin/pip" install -q --disable-pip-version-check "matrix-synapse==$CHATVAULT_SYNAPSE_VERSION" >&2 \
        || chatvault_die "pip could not install matrix-synapse $CHATVAULT_SYNAPSE_VERSION"
    # A venv's scripts name its own path: build it under the final name's parent, then move it in
    # one step and fix nothing (python -m is used everywhere, never the generated scripts).
    rm -rf "$venv"
    mv "$venv.partial" "$venv"
    # The interpreter link inside pyvenv.cfg-based venvs does not depend on the directory name.
    "$venv/bin/python" -c 'import synapse' || chatvault_die "the Synapse environment in $venv does not import"
    touch "$venv/.installed"
    CHATVAULT_SYNAPSE_PYTHON=$venv/bin/python
    export CHATVAULT_SYNAPSE_PYTHON
}

chatvault_synapse_free_port() {
    "$CHATVAULT_SYNAPSE_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Writes DIR/homeserver.yaml for a server on 127.0.0.1:PORT. Exported so tests can start a second
# server of their own (a server stopped and restarted mid-session) the same way. EXTRA (optional)
# is YAML appended to the configuration (a test's own settings, e.g. short-lived access tokens).
chatvault_synapse_configure() {
    local dir=$1 port=$2 secret=$3 extra=${4:-}
    mkdir -p -m 700 "$dir/media"
    cat > "$dir/log.yaml" <<EOF
version: 1
formatters:
  precise:
    format: '%(asctime)s - %(name)s - %(lineno)d - %(levelname)s - %(message)s'
handlers:
  file:
    class: logging.FileHandler
    formatter: precise
    filename: $dir/homeserver.log
root:
  level: WARNING
  handlers: [file]
disable_existing_loggers: false
EOF
    cat > "$dir/homeserver.yaml" <<EOF
server_name: "localhost"
pid_file: "$dir/homeserver.pid"
public_baseurl: "http://127.0.0.1:$port/"
listeners:
  - port: $port
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "$dir/homeserver.db"
log_config: "$dir/log.yaml"
media_store_path: "$dir/media"
signing_key_path: "$dir/signing.key"
registration_shared_secret: "$secret"
macaroon_secret_key: "$secret-macaroon"
form_secret: "$secret-form"
report_stats: false
enable_metrics: false
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
presence:
  enabled: false
caches:
  sync_response_cache_duration: 0
rc_message: {per_second: 10000, burst_count: 10000}
rc_registration: {per_second: 10000, burst_count: 10000}
rc_login:
  address: {per_second: 10000, burst_count: 10000}
  account: {per_second: 10000, burst_count: 10000}
  failed_attempts: {per_second: 10000, burst_count: 10000}
rc_joins:
  local: {per_second: 10000, burst_count: 10000}
rc_invites:
  per_room: {per_second: 10000, burst_count: 10000}
  per_user: {per_second: 10000, burst_count: 10000}
  per_issuer: {per_second: 10000, burst_count: 10000}
rc_media_create: {per_second: 10000, burst_count: 10000}
rc_room_creation: {per_second: 10000, burst_count: 10000}
rc_joins_per_room: {per_second: 10000, burst_count: 10000}
EOF
    [ -z "$extra" ] || printf '%s\n' "$extra" >> "$dir/homeserver.yaml"
    chmod 600 "$dir/homeserver.yaml"
    "$CHATVAULT_SYNAPSE_PYTHON" -m synapse.app.homeserver --config-path "$dir/homeserver.yaml" --generate-keys \
        >>"$dir/homeserver.log" 2>&1 || chatvault_die "synapse could not generate its signing key (see $dir/homeserver.log)"
}

chatvault_synapse_start() {
    local dir=$1 port secret tries
    [ -n "${CHATVAULT_SYNAPSE_PYTHON:-}" ] || chatvault_synapse_install
    port=$(chatvault_synapse_free_port)
    secret=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
    chatvault_synapse_configure "$dir" "$port" "$secret"
    "$CHATVAULT_SYNAPSE_PYTHON" -m synapse.app.homeserver --config-path "$dir/homeserver.yaml" \
        >>"$dir/homeserver.log" 2>&1 </dev/null &
    CHATVAULT_SYNAPSE_PID=$!
    CHATVAULT_SYNAPSE_URL=http://127.0.0.1:$port
    CHATVAULT_SYNAPSE_SECRET=$secret
    CHATVAULT_SYNAPSE_DIR=$dir
    export CHATVAULT_SYNAPSE_PID CHATVAULT_SYNAPSE_URL CHATVAULT_SYNAPSE_SECRET CHATVAULT_SYNAPSE_DIR
    tries=300
    until "$CHATVAULT_SYNAPSE_PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/_matrix/client/versions", timeout=1)' \
            "$CHATVAULT_SYNAPSE_URL" >/dev/null 2>&1; do
        if ! kill -0 "$CHATVAULT_SYNAPSE_PID" 2>/dev/null; then
            tail -n 30 "$dir/homeserver.log" >&2 || true
            chatvault_die "synapse exited before it answered (log above: $dir/homeserver.log)"
        fi
        tries=$(( tries - 1 ))
        [ "$tries" -gt 0 ] || { chatvault_synapse_stop; chatvault_die "synapse did not answer within 30 s"; }
        sleep 0.1
    done
}

chatvault_synapse_stop() {
    local pid=${CHATVAULT_SYNAPSE_PID:-} tries=50
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null && [ "$tries" -gt 0 ]; do
        sleep 0.1
        tries=$(( tries - 1 ))
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    CHATVAULT_SYNAPSE_PID=
}
