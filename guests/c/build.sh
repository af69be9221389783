#!/usr/bin/env bash
# Builds wasi_fs_all.c into target/wasi_fs_all.wasm (a WASI preview-1
# command module) with wasi-libc: zig's (pip's `ziglang`, installed here if
# missing), else Debian's clang + lld + wasi-libc. Skipped when the .wasm is
# newer than the .c. Without any toolchain it says so and exits 0.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/wasi_fs_all.c"
out="$here/target/wasi_fs_all.wasm"
if [ -f "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "$0" ]; then
  exit 0
fi
mkdir -p "$here/target"
flags=(-O2 -Wall -o "$out.tmp" "$src")
py="$(command -v python3 || true)"
have_zig() { [ -n "$py" ] && "$py" -m ziglang version >/dev/null 2>&1; }
if ! have_zig && [ -n "$py" ]; then
  "$py" -m pip install --quiet ziglang >/dev/null 2>&1 ||
    "$py" -m pip install --quiet --user ziglang >/dev/null 2>&1 || true
fi
if have_zig; then
  "$py" -m ziglang cc -target wasm32-wasi -s "${flags[@]}" || exit 1
elif command -v clang >/dev/null 2>&1 && [ -d /usr/include/wasm32-wasi ]; then
  clang --target=wasm32-wasi --sysroot=/usr -s "${flags[@]}" || exit 1
else
  echo "guests/c: no wasi-libc toolchain (pip ziglang, or apt clang lld wasi-libc): wasi_fs_all.wasm not built"
  exit 0
fi
mv "$out.tmp" "$out"
echo "guests/c: built $out"
