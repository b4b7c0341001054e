#!/usr/bin/env bash
# Egress through a sandbox's proxy, against the same transfers made
# directly and through Anthropic's sandbox-runtime, in the same run:
#
#   proxy    a sandbox made with `--allow up.test --egress-hosts HOSTS`: the
#            client reaches the upstream only through 127.0.0.1:3128 (the
#            agent hands the connection to the sandbox's proxy container)
#   direct   a sandbox made with `--network default` (Podman's bridge),
#            connecting straight to the upstream's address
#   srt      the same client under `srt` (@anthropic-ai/sandbox-runtime from
#            npm: bubblewrap with no network, socat relays to its HTTP proxy
#            on the host), allowedDomains ["up.test"], through $HTTP_PROXY
#   host     the client on the host, no sandbox (for reference: what srt's
#            workload would do without srt)
#
# The client is tests/bench/egress_client.c (static: it runs in the busybox
# image and under bubblewrap alike), copied into each sandbox with --mount
# and run with `sandpod exec`. It measures inside the sandbox, so no
# `sandpod exec` or `srt` start-up is in any number:
#   connections  each: TCP connect (directly; or to the proxy, CONNECT
#                up.test:PORT and its 200), one byte to an echo server and
#                its echo back, close. Latency per connection, median and
#                p99; "setup" is the part up to a usable stream.
#   throughput   one connection reading BYTES from a server that streams
#                zeros; MB/s (10^6 bytes per second) from the first byte
#                asked for to the last one read.
# The upstreams (echo and zeros, the same static binary, a thread per
# connection) are the bench's own and nothing leaves the machine: they run
# in a network namespace the bench makes, behind a veth pair on a /24 of
# 198.18.0.0/15 that no interface or route of the machine uses (checked).
# The proxy resolves up.test from --egress-hosts; srt's proxy resolves it
# from /etc/hosts, so srt runs in a mount namespace of its own where a copy
# of /etc/hosts with that line is bound over it (the machine's is not
# touched).
#
# Paths are interleaved: ROUNDS rounds, each running N/ROUNDS connections
# on every path (the order rotated), then TP_REPS rounds of one transfer on
# every path; medians and p99s are over all samples of a path.
#
# Usage: tests/bench/bench_egress.sh [--quick]
#   env BUILD (default build-bench, Release), N (connections per path,
#   default 1000), ROUNDS (default 5), BYTES (per transfer, default
#   500000000), TP_REPS (transfers per path, default 5), SRT=0 (leave
#   sandbox-runtime out), BENCH_OUT (default tests/bench/results/egress.json),
#   SANDPOD_URL (default unix:///run/podman/podman.sock), SANDPOD_AGENT
#   (default the build's sandpod-agent; another one, say with a changed
#   proxy, is what the sandboxes and their proxies then run);
#   --quick: N=100 ROUNDS=2 BYTES=100000000 TP_REPS=2.
# Needs root (the network namespace), ip, python3 and a Podman service.
# sandbox-runtime: installed with npm into $BUILD/srt when missing; needs
# node >= 20.11, bubblewrap and socat (apt-get install bubblewrap socat);
# when it cannot run, its rows say why.
# Writes BENCH_OUT (machine, load, every sample, the goals) and prints a
# markdown table. Removes every sandbox, namespace and process it made.
set -euo pipefail

bench=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$bench/../.." && pwd)
build=${BUILD:-$repo/build-bench}
n=${N:-1000} rounds=${ROUNDS:-5} bytes=${BYTES:-500000000} tp_reps=${TP_REPS:-5}
if [ "${1:-}" = --quick ]; then
    n=100 rounds=2 bytes=100000000 tp_reps=2
fi
out=${BENCH_OUT:-$bench/results/egress.json}
export SANDPOD_URL=${SANDPOD_URL:-unix:///run/podman/podman.sock}
say() { printf '%s\n' "$*" >&2; }

[ "$(id -u)" = 0 ] || { say "bench_egress: needs root (a network namespace for the upstreams)"; exit 77; }
for t in ip python3 podman unshare; do
    command -v "$t" >/dev/null || { say "bench_egress: $t is missing"; exit 77; }
done

T=$(mktemp -d /tmp/sandpod-bench-egress-XXXXXX)
export SANDPOD_HOME=$T/home
mkdir -p "$SANDPOD_HOME" "$T/bin" "$T/samples" "$T/srt-tmp"
NS='' VETH='' SERVER='' sp=''
cleanup() {
    set +e
    local d
    for d in "$SANDPOD_HOME"/sandboxes/*/; do
        [ -d "$d" ] && [ -n "$sp" ] && "$sp" rm --force "$(basename "$d")" >/dev/null 2>&1
    done
    [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
    [ -n "$VETH" ] && ip link del "$VETH" 2>/dev/null
    [ -n "$NS" ] && ip netns del "$NS" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "== building ($build)"
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target sandpod_cli sandpod_agent bench_egress_client >/dev/null
sp=$build/sandpod
export SANDPOD_AGENT=${SANDPOD_AGENT:-$build/sandpod-agent}
cp "$build/tests/egress_client" "$T/bin/egress_client"
client=$T/bin/egress_client
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# ------------------------------------------------------------ upstreams
NET=
for _ in $(seq 1 40); do
    cand="198.$((18 + RANDOM % 2)).$((RANDOM % 256))"
    if ! ip -4 addr | grep -F " $cand." >/dev/null && ! ip -4 route | grep -F "$cand." >/dev/null; then
        NET=$cand
        break
    fi
done
[ -n "$NET" ] || { say "bench_egress: no free /24 in 198.18.0.0/15"; exit 1; }
NS=spbeg$$
VETH=spbeg$$h
ip netns add "$NS"
ip link add "$VETH" type veth peer name "spbeg$$n"
ip link set "spbeg$$n" netns "$NS"
ip addr add "$NET.1/24" dev "$VETH"
ip link set "$VETH" up
ip netns exec "$NS" ip addr add "$NET.2/24" dev "spbeg$$n"
ip netns exec "$NS" ip link set "spbeg$$n" up
ip netns exec "$NS" ip link set lo up
# Replies to a bridged container (if Podman's NAT leaves its address) go back
# through the host.
ip netns exec "$NS" ip route add default via "$NET.1"
UP=$NET.2 EPORT=9000 SPORT=9001
ip netns exec "$NS" "$client" serve "$UP" "$EPORT" "$SPORT" 2>/dev/null &
SERVER=$!
for _ in $(seq 1 100); do
    "$client" connect 1 "$UP" "$EPORT" --warmup 0 >/dev/null 2>&1 && break
    sleep 0.1
done
"$client" connect 1 "$UP" "$EPORT" --warmup 0 >/dev/null
say "== upstreams on $UP (namespace $NS): echo :$EPORT, zeros :$SPORT"
printf '%s up.test\n' "$UP" >"$T/hosts"

# ------------------------------------------------------------ sandboxes
say "== sandboxes"
"$sp" create --name eg-proxy --allow up.test --egress-hosts "$T/hosts" --mount "$T/bin" \
    >/dev/null 2>"$T/create.err" || { cat "$T/create.err" >&2; exit 1; }
"$sp" create --name eg-direct --network default --mount "$T/bin" >/dev/null 2>"$T/create.err" ||
    { cat "$T/create.err" >&2; exit 1; }
"$sp" exec eg-proxy -- /workspace/egress_client connect 1 up.test "$EPORT" --warmup 0 \
    --proxy 127.0.0.1:3128 >/dev/null
direct_ok=1 direct_why=''
if ! "$sp" exec eg-direct -- /workspace/egress_client connect 1 "$UP" "$EPORT" --warmup 0 \
    >/dev/null 2>"$T/direct.err"; then
    direct_ok=0 direct_why="the --network default sandbox cannot reach $UP: $(head -n 1 "$T/direct.err")"
    say "bench_egress: $direct_why"
fi

# The client on PATH: run_path PATH MODE COUNT PORT [ARG...]
srt_run() { # MODE COUNT HOST PORT [ARG...]: the client under srt, through its proxy
    # shellcheck disable=SC2016 # expanded by the inner shells
    # TMPDIR: srt leaves its sockets (srt-mux-PID-N.sock) in the temporary
    # folder; this one goes at cleanup.
    TMPDIR=$T/srt-tmp unshare -m sh -c \
        'mount --bind "$1" /etc/hosts && exec node "$2" --settings "$3" -c "$4"' \
        srt "$T/hosts.srt" "$srt_cli" "$T/srt.json" "$client $* --proxy \"\$HTTP_PROXY\""
}
run_path() {
    local path=$1 mode=$2 count=$3 port=$4
    shift 4
    case $path in
    proxy) "$sp" exec eg-proxy -- /workspace/egress_client "$mode" "$count" up.test "$port" \
        --proxy 127.0.0.1:3128 "$@" ;;
    direct) "$sp" exec eg-direct -- /workspace/egress_client "$mode" "$count" "$UP" "$port" "$@" ;;
    srt) srt_run "$mode" "$count" up.test "$port" "$@" ;;
    host) "$client" "$mode" "$count" "$UP" "$port" "$@" ;;
    esac
}

# ------------------------------------------------------ sandbox-runtime
srt_ok=0 srt_why='' srt_version=''
srt_dir=$build/srt
srt_cli=$srt_dir/node_modules/@anthropic-ai/sandbox-runtime/dist/cli.js
if [ "${SRT:-1}" = 0 ]; then
    srt_why="left out (SRT=0)"
elif ! command -v node >/dev/null; then
    srt_why="node is missing"
elif ! command -v bwrap >/dev/null || ! command -v socat >/dev/null; then
    srt_why="bubblewrap or socat is missing (apt-get install bubblewrap socat)"
else
    if [ ! -f "$srt_cli" ]; then
        say "== installing @anthropic-ai/sandbox-runtime into $srt_dir"
        mkdir -p "$srt_dir"
        npm install --prefix "$srt_dir" --no-audit --no-fund @anthropic-ai/sandbox-runtime \
            >"$T/npm.log" 2>&1 || srt_why="npm install failed: $(tail -n 1 "$T/npm.log")"
    fi
    if [ -f "$srt_cli" ]; then
        srt_version=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' \
            "$srt_dir/node_modules/@anthropic-ai/sandbox-runtime/package.json")
        cat >"$T/srt.json" <<EOF
{"network": {"allowedDomains": ["up.test"], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}
EOF
        { cat /etc/hosts; printf '%s up.test\n' "$UP"; } >"$T/hosts.srt"
        if srt_run connect 1 up.test "$EPORT" --warmup 0 >/dev/null 2>"$T/srt.err"; then
            srt_ok=1
        else
            srt_why="srt did not run the client: $(grep -v '^$' "$T/srt.err" | tail -n 2 | tr '\n' ' ')"
        fi
    fi
fi
if [ "$srt_ok" = 1 ]; then
    say "== sandbox-runtime $srt_version"
else
    say "== sandbox-runtime: $srt_why"
fi

paths=(proxy)
[ "$direct_ok" = 1 ] && paths+=(direct)
[ "$srt_ok" = 1 ] && paths+=(srt)
paths+=(host)

# ---------------------------------------------------------- connections
per=$(((n + rounds - 1) / rounds))
say "== connections: $rounds rounds of $per per path (${paths[*]})"
for ((r = 0; r < rounds; r++)); do
    for ((i = 0; i < ${#paths[@]}; i++)); do
        p=${paths[$(((i + r) % ${#paths[@]}))]}
        run_path "$p" connect "$per" "$EPORT" >"$T/samples/conn-$p-$r.json" 2>"$T/err" ||
            { say "bench_egress: $p failed: $(tail -n 2 "$T/err")"; exit 1; }
    done
    say "   round $((r + 1)) done"
done

# ----------------------------------------------------------- throughput
say "== throughput: $tp_reps transfers of $bytes bytes per path"
for ((r = 0; r < tp_reps; r++)); do
    for ((i = 0; i < ${#paths[@]}; i++)); do
        p=${paths[$(((i + r) % ${#paths[@]}))]}
        run_path "$p" throughput "$bytes" "$SPORT" --reps 1 >"$T/samples/tp-$p-$r.json" 2>"$T/err" ||
            { say "bench_egress: $p failed: $(tail -n 2 "$T/err")"; exit 1; }
    done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# --------------------------------------------------------------- report
python3 - "$T/samples" "$out" "$n" "$rounds" "$bytes" "$tp_reps" "$load_start" "$load_end" \
    "$direct_ok" "$direct_why" "$srt_ok" "$srt_why" "$srt_version" <<'PY'
import glob, json, os, platform, subprocess, sys, time
(sdir, out, n, rounds, nbytes, tp_reps, load_start, load_end, direct_ok, direct_why,
 srt_ok, srt_why, srt_version) = sys.argv[1:]

def med(v):
    v = sorted(v)
    k = len(v)
    return v[k // 2] if k % 2 else (v[k // 2 - 1] + v[k // 2]) / 2

def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]

PCTS = [("min", 0), ("p10", .1), ("p25", .25), ("p50", .5), ("p75", .75), ("p90", .9),
        ("p99", .99), ("p99.9", .999), ("max", 1)]
labels = {
    "proxy": "sandpod `--allow` (its proxy)",
    "direct": "sandpod `--network default` (direct)",
    "srt": "sandbox-runtime `srt` (its proxy)",
    "host": "host, no sandbox (direct)",
}
res = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
       "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                   "podman": subprocess.run(["podman", "--version"], capture_output=True,
                                            text=True).stdout.strip(),
                   "loadavg_start": load_start.split(), "loadavg_end": load_end.split()},
       "connections_per_path": 0, "rounds": int(rounds), "bytes_per_transfer": int(nbytes),
       "transfers_per_path": int(tp_reps),
       "method": "client inside the sandbox (tests/bench/egress_client.c); per connection: "
                 "connect (+ CONNECT and its 200 through a proxy), 1-byte echo, close; "
                 "throughput: one connection reading BYTES of zeros; paths interleaved; "
                 "percentiles are nearest-rank",
       "sandbox_runtime": {"run": srt_ok == "1", "version": srt_version or None,
                           "why_not": None if srt_ok == "1" else srt_why},
       "direct": {"run": direct_ok == "1", "why_not": None if direct_ok == "1" else direct_why},
       "paths": {}}
for p in ("proxy", "direct", "srt", "host"):
    setup, total, mbs = [], [], []
    for f in sorted(glob.glob(os.path.join(sdir, "conn-%s-*.json" % p))):
        j = json.load(open(f))
        setup += j["setup"]["samples_us"]
        total += j["total"]["samples_us"]
    for f in sorted(glob.glob(os.path.join(sdir, "tp-%s-*.json" % p))):
        mbs += json.load(open(f))["mb_per_s"]
    if not total:
        continue
    res["connections_per_path"] = len(total)
    ms = lambda v: [x / 1000 for x in v]
    res["paths"][p] = {
        "label": labels[p],
        "connection_median_ms": med(ms(total)), "connection_p99_ms": pct(ms(total), .99),
        "setup_median_ms": med(ms(setup)), "setup_p99_ms": pct(ms(setup), .99),
        "echo_close_median_ms": med([(t - s) / 1000 for s, t in zip(setup, total)]),
        "throughput_median_mb_s": med(mbs), "throughput_min_mb_s": min(mbs),
        "throughput_max_mb_s": max(mbs),
        # The distributions, not every sample (1,000s per path).
        "connection_percentiles_ms": {q: pct(ms(total), f) for q, f in PCTS},
        "setup_percentiles_ms": {q: pct(ms(setup), f) for q, f in PCTS},
        "throughput_samples_mb_s": mbs,
    }
P = res["paths"]
goals = []
def goal(name, measured, met):
    goals.append({"goal": name, "measured": measured, "met": met})
px = P["proxy"]
if "direct" in P:
    d = P["direct"]
    add_med = px["connection_median_ms"] - d["connection_median_ms"]
    add_p99 = px["connection_p99_ms"] - d["connection_p99_ms"]
    res["added_ms_per_connection"] = {"median": add_med, "p99": add_p99}
    goal("<= 0.5 ms added per connection at the median (vs --network default)",
         "%+.2f ms at the median, %+.2f ms at p99" % (add_med, add_p99), add_med <= 0.5)
    ratio = px["throughput_median_mb_s"] / d["throughput_median_mb_s"]
    res["throughput_ratio_vs_direct"] = ratio
    goal(">= 80% of direct throughput", "%.0f%% (%.0f / %.0f MB/s)" % (
        100 * ratio, px["throughput_median_mb_s"], d["throughput_median_mb_s"]), ratio >= 0.8)
else:
    goal("<= 0.5 ms added per connection at the median", "not measured: " + direct_why, None)
    goal(">= 80% of direct throughput", "not measured: " + direct_why, None)
if "srt" in P:
    s = P["srt"]
    r1 = s["connection_median_ms"] / px["connection_median_ms"]
    r2 = px["throughput_median_mb_s"] / s["throughput_median_mb_s"]
    res["vs_sandbox_runtime"] = {"connection_srt_over_sandpod": r1,
                                 "throughput_sandpod_over_srt": r2}
    goal("ahead of sandbox-runtime per connection",
         "srt %.2f ms vs %.2f ms at the median (%.1fx)" % (
             s["connection_median_ms"], px["connection_median_ms"], r1), r1 > 1)
    goal("ahead of sandbox-runtime in throughput", "%.0f vs srt %.0f MB/s (%.2fx)" % (
        px["throughput_median_mb_s"], s["throughput_median_mb_s"], r2), r2 > 1)
else:
    goal("ahead of sandbox-runtime", "not measured: " + srt_why, None)
res["goals"] = goals

md = ["| path | per connection median ms | p99 ms | to a usable stream, median ms | "
      "echo + close, median ms | throughput median MB/s | min-max MB/s |",
      "|---|---:|---:|---:|---:|---:|---:|"]
for p in ("proxy", "direct", "srt", "host"):
    if p in P:
        x = P[p]
        md.append("| %s | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f-%.0f |" % (
            x["label"], x["connection_median_ms"], x["connection_p99_ms"], x["setup_median_ms"],
            x["echo_close_median_ms"], x["throughput_median_mb_s"], x["throughput_min_mb_s"],
            x["throughput_max_mb_s"]))
if "srt" not in P:
    md.append("| sandbox-runtime | not run: %s | | | | | |" % srt_why)
md += ["", "| goal | measured | met |", "|---|---|---|"]
for g in goals:
    md.append("| %s | %s | %s |" % (g["goal"], g["measured"],
                                   "-" if g["met"] is None else ("yes" if g["met"] else "**no**")))
res["markdown"] = "\n".join(md)
os.makedirs(os.path.dirname(out), exist_ok=True)
json.dump(res, open(out, "w"), indent=1)
print("egress: %d connections and %d transfers of %d bytes per path; load %s -> %s; %s\n" % (
    res["connections_per_path"], int(tp_reps), int(nbytes), load_start, load_end,
    "sandbox-runtime " + srt_version if srt_ok == "1" else "sandbox-runtime not run"))
print(res["markdown"])
print("\nwritten: %s" % out)
PY
