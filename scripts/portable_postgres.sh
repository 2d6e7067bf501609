#!/usr/bin/env bash
# Pack this machine's PostgreSQL server into one tarball that runs on another x86-64 Linux host without
# installing anything there (a GPU box, for the load test's PostgreSQL rows): the server's programs, its
# share/ and lib/ folders, and every shared library they load, the C library and its loader included, so a
# host with an older glibc runs it as well. Each program is started through the bundled loader by a small
# wrapper of the same name, which is also what initdb and pg_ctl find beside themselves and start.
#
# Usage:  scripts/portable_postgres.sh OUT.tar.gz          (here, where PostgreSQL is installed)
#         tar -xzf OUT.tar.gz -C DIR && DIR/pg/start.sh DATA PORT   (there, as root or a user)
# start.sh makes a cluster in DATA owned by `nobody` (PostgreSQL refuses to run as root), trusting local
# connections, and starts it on 127.0.0.1:PORT with a database named `padbench_loadtest`.
set -euo pipefail
out=$(realpath "$1")
bin=$(dirname "$(readlink -f "$(command -v pg_config >/dev/null && pg_config --bindir || ls -d /usr/lib/postgresql/*/bin | tail -1)/postgres")")
version=$(basename "$(dirname "$bin")")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
root=$work/pg
programs=(postgres initdb pg_ctl psql createdb pg_isready)
mkdir -p "$root/usr/lib/postgresql/$version/bin" "$root/usr/share/postgresql" "$root/libs"
cp -a "/usr/lib/postgresql/$version/lib" "$root/usr/lib/postgresql/$version/"
# The JIT (llvmjit.so, its LLVM and bitcode) is loaded only with jit=on, and is most of the size.
rm -rf "$root/usr/lib/postgresql/$version/lib/bitcode" "$root/usr/lib/postgresql/$version/lib/"llvmjit*
cp -a "/usr/share/postgresql/$version" "$root/usr/share/postgresql/"
# share/ is found relative to bin/ by the layout the programs were built with (/usr/lib/... and /usr/share/...).
for program in "${programs[@]}"; do
  cp "$bin/$program" "$root/usr/lib/postgresql/$version/bin/$program.bin"
done
# Every library a program or a server module loads, resolved here, flattened into libs/.
for file in "$root/usr/lib/postgresql/$version/bin/"*.bin "$root/usr/lib/postgresql/$version/lib/"*.so; do
  ldd "$file" 2>/dev/null | awk '/=> \// {print $3} /^\t\/lib/ {print $1}'
done | sort -u | while read -r library; do cp -L "$library" "$root/libs/"; done
for program in "${programs[@]}"; do
  cat > "$root/usr/lib/postgresql/$version/bin/$program" <<'EOF'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")"); libs=$here/../../../../../libs
exec "$libs/ld-linux-x86-64.so.2" --library-path "$libs" "$here/$(basename "$0").bin" "$@"
EOF
  chmod +x "$root/usr/lib/postgresql/$version/bin/$program"
done
cat > "$root/start.sh" <<EOF
#!/bin/sh
# start.sh DATA PORT: a fresh cluster in DATA, owned by nobody, listening on 127.0.0.1:PORT.
set -eu
bin=\$(dirname "\$(readlink -f "\$0")")/usr/lib/postgresql/$version/bin
data=\$1; port=\$2
mkdir -p "\$data" && chown nobody "\$data" && chmod 700 "\$data"
as_nobody() { if [ "\$(id -u)" = 0 ]; then setpriv --reuid=nobody --regid=nogroup --clear-groups -- "\$@"; else "\$@"; fi; }
as_nobody "\$bin/initdb" -D "\$data" -U postgres --auth=trust --locale=C --encoding=UTF8 >/dev/null
as_nobody "\$bin/pg_ctl" -D "\$data" -l "\$data/server.log" -w -o "-c listen_addresses=127.0.0.1 -p \$port -c max_connections=300 -c jit=off -c unix_socket_directories=\$data" start >/dev/null
as_nobody "\$bin/createdb" -h 127.0.0.1 -p "\$port" -U postgres padbench_loadtest
echo "postgresql://postgres@127.0.0.1:\$port/padbench_loadtest"
EOF
chmod +x "$root/start.sh"
tar -czf "$out" -C "$work" pg
du -h "$out"
