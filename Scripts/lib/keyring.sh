# Private D-Bus sessions with a headless gnome-keyring, for Scripts/test and Scripts/chatvault.
# Source after common.sh.

# Tells the session bus what environment to give the services it activates (a gnome-keyring that
# restarts, gcr-prompter): the keyring's own directories, and no display, so an unlock prompt fails
# at once instead of opening a window on the developer's desktop.
#   chatvault_keyring_activation_env HOME XDG_DATA_HOME XDG_RUNTIME_DIR
chatvault_keyring_activation_env() {
    dbus-update-activation-environment HOME="$1" XDG_DATA_HOME="$2" XDG_RUNTIME_DIR="$3" \
        XDG_CONFIG_HOME="$1/.config" XDG_CACHE_HOME="$1/.cache" DISPLAY= WAYLAND_DISPLAY=
}

# Starts gnome-keyring's Secret Service on the current session bus and unlocks (or, the first time,
# creates) its login keyring with the password read from stdin. Waits until the service answers.
#   printf %s "$password" | chatvault_keyring_start HOME XDG_DATA_HOME XDG_RUNTIME_DIR LOG [--replace]
chatvault_keyring_start() {
    local home=$1 data=$2 runtime=$3 log=$4 replace=${5:-}
    # The daemon forks into the background; its stdout (environment lines) is not needed.
    env HOME="$home" XDG_DATA_HOME="$data" XDG_RUNTIME_DIR="$runtime" \
        XDG_CONFIG_HOME="$home/.config" XDG_CACHE_HOME="$home/.cache" DISPLAY= WAYLAND_DISPLAY= \
        gnome-keyring-daemon $replace --unlock --components=secrets >/dev/null 2>>"$log"
    chatvault_wait_for_secret_service 10 || { cat "$log" >&2; return 1; }
}

# True once org.freedesktop.secrets is owned on the session bus (polls up to $1 seconds).
chatvault_wait_for_secret_service() {
    local tries=$(( ${1:-10} * 10 ))
    while [ "$tries" -gt 0 ]; do
        if chatvault_bus_name_has_owner org.freedesktop.secrets; then return 0; fi
        sleep 0.1
        tries=$((tries - 1))
    done
    echo "the Secret Service did not appear on the session bus" >&2
    return 1
}

chatvault_bus_name_has_owner() {
    dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner "string:$1" 2>/dev/null | grep -q 'boolean true'
}

chatvault_bus_name_activatable() {
    dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.ListActivatableNames 2>/dev/null | grep -q "\"$1\""
}

# Prints the ids of the running processes (not zombies, not this shell) whose environment has a
# variable set to the directory $1 or to a path inside it: XDG_RUNTIME_DIR of the daemons started
# for one session (gnome-keyring, and whatever the bus activated with the activation environment
# above), the session log, the homes of the private sessions the tests and the CLI start below
# it. Each session has a directory of its own, so this never lists another session's processes.
chatvault_processes_using() {
    local dir=$1 pid line
    for pid in $(ls /proc 2>/dev/null | grep -E '^[0-9]+$'); do
        if [ "$pid" = "$$" ] || [ "$pid" = "${BASHPID:-}" ]; then continue; fi
        chatvault_process_alive "$pid" || continue
        { while IFS= read -r -d '' line; do
              case $line in
                  *="$dir"|*="$dir"/*) echo "$pid"; break ;;
              esac
          done < "/proc/$pid/environ"; } 2>/dev/null || true
    done
}

# True while process $1 runs (a zombie has finished; only its parent's wait is missing).
chatvault_process_alive() {
    local stat state
    { read -r stat < "/proc/$1/stat"; } 2>/dev/null || return 1
    state=${stat##*) }
    state=${state%% *}
    [ "$state" != Z ] && [ "$state" != X ]
}

# Stops, by process id, the processes chatvault_processes_using lists for the directory $1:
# SIGTERM, then SIGKILL for whatever still runs after ${2:-3} seconds (a daemon that blocks or
# ignores SIGTERM must not outlive the run).
chatvault_stop_processes_using() {
    local dir=$1 grace=${2:-3} pids pid tries
    pids=$(chatvault_processes_using "$dir")
    [ -n "$pids" ] || return 0
    kill $pids 2>/dev/null || true
    tries=$(( grace * 10 ))
    while [ "$tries" -gt 0 ]; do
        pids=$(for pid in $pids; do chatvault_process_alive "$pid" && echo "$pid"; done; true)
        [ -n "$pids" ] || return 0
        sleep 0.1
        tries=$(( tries - 1 ))
    done
    kill -KILL $pids 2>/dev/null || true
}

# True when the current session bus (if any) has org.freedesktop.secrets, owned or activatable.
# Never autolaunches a bus: without DBUS_SESSION_BUS_ADDRESS only $XDG_RUNTIME_DIR/bus is tried.
chatvault_secret_service_reachable() {
    local address=${DBUS_SESSION_BUS_ADDRESS:-}
    if [ -z "$address" ]; then
        [ -n "${XDG_RUNTIME_DIR:-}" ] && [ -S "$XDG_RUNTIME_DIR/bus" ] || return 1
        address=unix:path=$XDG_RUNTIME_DIR/bus
    fi
    DBUS_SESSION_BUS_ADDRESS=$address chatvault_bus_name_has_owner org.freedesktop.secrets \
        || DBUS_SESSION_BUS_ADDRESS=$address chatvault_bus_name_activatable org.freedesktop.secrets
}
