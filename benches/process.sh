#!/usr/bin/env bash
# A whole process, side by side (issue 13): `gatehouse run` of the
# `cli-echo` command (one turn: configuration, snapshot, gate, engine,
# cached component, run, audit) against `wasmtime run --allow-precompiled`
# of the same component precompiled with `wasmtime compile`, alternating
# runs, both fed the same stdin and checked to print the same stdout.
# Prints p50/p99 per process and the ratio; the last line is one JSON
# object. Target: gatehouse / wasmtime <= 1.0x.
#
# Needs the release binary and the guests (`./setup.sh && cargo build
# --release`, done here if missing) and, for the comparison, the wasmtime
# CLI 48.0.8 (`cargo install wasmtime-cli --version 48.0.8 --locked`; or
# set WASMTIME=/path/to/wasmtime). Without it, says so and times gatehouse
# alone. RUNS=N sets the runs of each (default 300, after 20 warm-up).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-300}"
[ -f guests/target/wasm32-wasip2/release/cli_echo.wasm ] || bash ./setup.sh >/dev/null
[ -x target/release/gatehouse ] || cargo build --release --quiet
wasm="guests/target/wasm32-wasip2/release/cli_echo.wasm"

wasmtime="${WASMTIME:-}"
if [ -z "$wasmtime" ]; then
  for candidate in "$(command -v wasmtime || true)" /opt/wasmtime-48/bin/wasmtime "$HOME/.cargo/bin/wasmtime"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then wasmtime="$candidate"; break; fi
  done
fi
if [ -n "$wasmtime" ] && ! "$wasmtime" --version 2>/dev/null | grep -q '48\.0\.8'; then
  echo "process: $wasmtime is not wasmtime 48.0.8 ($("$wasmtime" --version 2>&1 | head -1)): timing gatehouse alone"
  wasmtime=""
elif [ -z "$wasmtime" ]; then
  echo "process: the wasmtime CLI 48.0.8 is not installed (cargo install wasmtime-cli --version 48.0.8 --locked): timing gatehouse alone"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/state" "$tmp/home" "$tmp/ws"
head -c 4096 /dev/urandom | base64 > "$tmp/input.txt"
cwasm=""
if [ -n "$wasmtime" ]; then
  cwasm="$tmp/cli_echo.cwasm"
  "$wasmtime" compile "$wasm" -o "$cwasm"
fi

RUNS="$runs" WASMTIME_BIN="$wasmtime" CWASM="$cwasm" TMPD="$tmp" python3 - <<'EOF'
import json, os, platform, subprocess, sys, time

runs = int(os.environ["RUNS"])
tmp = os.environ["TMPD"]
wasmtime, cwasm = os.environ["WASMTIME_BIN"], os.environ["CWASM"]
stdin = open(os.path.join(tmp, "input.txt"), "rb").read()
env = dict(os.environ, GATEHOUSE_STATE_DIR=os.path.join(tmp, "state"),
           HOME=os.path.join(tmp, "home"), XDG_CONFIG_HOME=os.path.join(tmp, "home", ".config"))
for k in ("GATEHOUSE_CONFIG", "GATEHOUSE_GRANTS_DB", "GATEHOUSE_HISTORY_DIR"):
    env.pop(k, None)
sides = {"gatehouse": ["target/release/gatehouse", "run", "guests/cli-echo/executor.toml",
                       "--workspace", os.path.join(tmp, "ws"), "--", "a", "b"]}
if wasmtime:
    sides["wasmtime"] = [wasmtime, "run", "--allow-precompiled", cwasm, "a", "b"]

def once(argv):
    start = time.perf_counter_ns()
    p = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    took = (time.perf_counter_ns() - start) / 1e6
    if p.returncode != 0:
        sys.exit(f"process: {argv[0]} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return took, p.stdout

outputs = {name: once(argv)[1] for name, argv in sides.items()}
if any(out != stdin for out in outputs.values()):
    sys.exit("process: the two do not print the same output (the input, copied)")
for _ in range(20):
    for argv in sides.values():
        once(argv)
times = {name: [] for name in sides}
for _ in range(runs):  # alternating, so both see the same machine
    for name, argv in sides.items():
        times[name].append(once(argv)[0])

def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]

print(f"| one process, cli-echo ({runs} runs each, alternating) | p50 ms | p99 ms |")
print("|---|---|---|")
for name in sides:
    print(f"| {' '.join(sides[name][:2] if name == 'gatehouse' else ['wasmtime', 'run --allow-precompiled'])} | {pct(times[name], .5):.2f} | {pct(times[name], .99):.2f} |")
result = {"gatehouse_p50_ms": pct(times["gatehouse"], .5), "gatehouse_p99_ms": pct(times["gatehouse"], .99),
          "kernel": platform.release(), "runs": runs}
if "wasmtime" in times:
    ratio = pct(times["gatehouse"], .5) / pct(times["wasmtime"], .5)
    result.update(wasmtime_p50_ms=pct(times["wasmtime"], .5), wasmtime_p99_ms=pct(times["wasmtime"], .99), ratio_p50=ratio)
    print(f"\ngatehouse / wasmtime p50: {ratio:.2f}x (target <= 1.0x)")
print(json.dumps(result, sort_keys=True))
EOF
