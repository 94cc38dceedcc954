# Shared by the scripts in Scripts/: the repository root, the Swift toolchain, pkg-config.
# Source it (". Scripts/lib/common.sh"); it changes nothing outside this shell and .build/.

CHATVAULT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CHATVAULT_ROOT

chatvault_die() {
    printf '%s: %s\n' "${0##*/}" "$*" >&2
    exit 1
}

# Swift: from PATH, else the toolchain's usual place on our machines.
chatvault_find_swift() {
    if ! command -v swift >/dev/null 2>&1; then
        if [ -x /opt/swift/usr/bin/swift ]; then
            PATH=/opt/swift/usr/bin:$PATH
            export PATH
        else
            chatvault_die "no Swift toolchain: put swift on PATH (Swift 6 or later; https://www.swift.org/install/linux/)"
        fi
    fi
}

# Copies of the .pc files that carry -pthread, with it stripped: SwiftPM refuses -pthread in a
# system library's flags ("prohibited flag") and says so on every build. pkg-config reads
# PKG_CONFIG_PATH first and the system directories after it, so everything else is unchanged.
chatvault_pkgconfig() {
    local dir="$CHATVAULT_ROOT/.build/pkgconfig" f
    mkdir -p "$dir"
    for f in $(grep -l -- '-pthread' /usr/lib/x86_64-linux-gnu/pkgconfig/*.pc /usr/lib/pkgconfig/*.pc \
                 /usr/share/pkgconfig/*.pc 2>/dev/null); do
        sed 's/ -pthread\b//g' "$f" > "$dir/.${f##*/}.tmp" && mv -f "$dir/.${f##*/}.tmp" "$dir/${f##*/}"
    done
    PKG_CONFIG_PATH=$dir
    export PKG_CONFIG_PATH
}
