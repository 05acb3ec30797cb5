#!/usr/bin/env bash
# Side-by-side training throughput on this machine, one run: LeNet on Fashion-MNIST and
# ResNet-18 on 3x32x32, batch 64 per rank, as
#   1 process x 1 thread (pinned; the per-core base), 1 process x all cores (plain),
#   nano-run -n k (mpi and subprocess backends) and stock PyTorch DDP (Gloo, pinned ranks)
#   for each k dividing the physical cores (at most 8 values),
# plus the launcher start-up, all-reduce, DDP-overhead and batch-balancing benchmarks. Writes
# bench-results/results.json (raw numbers, machine, date, command), results.md (tables) and
# throughput.png, and prints the tables. Builds what it needs (Release, in $NANO_BUILD_DIR).
#
# Knobs (environment): NANO_BUILD_DIR (build), NANO_BENCH_OUT (bench-results),
#   NANO_BENCH_SCALE (1; multiplies the step counts), NANO_BENCH_LENET_STEPS (120),
#   NANO_BENCH_RESNET_STEPS (4), NANO_BENCH_REPEATS (3, LeNet), NANO_BENCH_RESNET_REPEATS (1),
#   NANO_BENCH_KS (e.g. "1,2,4"; default: divisors of the physical cores),
#   NANO_BENCH_MODELS (lenet,resnet18), NANO_BENCH_SUB (1; 0 skips the three other benchmarks),
#   NANO_BENCH_DDP (1; 0 skips the ddp benchmark only).
# Usage: scripts/bench.sh training   (or plain scripts/bench.sh)
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start training "$@"
command_line="scripts/bench.sh training${*:+ $*}"
for v in NANO_BENCH_SCALE NANO_BENCH_LENET_STEPS NANO_BENCH_RESNET_STEPS NANO_BENCH_REPEATS \
         NANO_BENCH_RESNET_REPEATS NANO_BENCH_KS NANO_BENCH_MODELS NANO_BENCH_SUB NANO_BENCH_DDP; do
  [[ -n ${!v:-} ]] && command_line="$v=${!v} $command_line"
done
build=$(bench_build_dir "")
out=${NANO_BENCH_OUT:-bench-results}
scale=${NANO_BENCH_SCALE:-1}
positive() { [[ $2 =~ ^[0-9]+$ && $2 -ge 1 ]] || { echo "bench: $1 must be a positive integer, got '$2'" >&2; exit 2; }; }
positive NANO_BENCH_SCALE "$scale"
lenet_steps=${NANO_BENCH_LENET_STEPS:-$((120 * scale))}
resnet_steps=${NANO_BENCH_RESNET_STEPS:-$((4 * scale))}
lenet_repeats=${NANO_BENCH_REPEATS:-3}
resnet_repeats=${NANO_BENCH_RESNET_REPEATS:-1}
for v in lenet_steps resnet_steps lenet_repeats resnet_repeats; do positive "$v" "${!v}"; done
models=${NANO_BENCH_MODELS:-lenet,resnet18}

# Build what is missing (Release, every option on).
needed=("$build/bin/nano-run" "$build/bin/nano-init" "$build/bin/fashion_mnist_nano" "$build/bin/resnet18_cifar"
        "$build/bench/nano_bench_allreduce" "$build/bench/nano_bench_ddp")
missing=0
for f in "${needed[@]}"; do [[ -x $f ]] || missing=1; done
if (( missing )); then
  echo "bench: building in $build (Release)" >&2
  scripts/install-deps.sh
  [[ -f $build/build.ninja ]] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build" -j"$(nproc)"
fi
for f in "$build/bin/nano-run" "$build/bin/nano-init" "$python"; do
  [[ -x $f ]] || { echo "bench: $f is missing" >&2; exit 2; }
done
command -v gnuplot >/dev/null || scripts/install-deps.sh

# Physical cores as nano sees them (hwloc, allowed CPUs only); hwloc-calc as a fallback.
cores=$(bench_cores "$build")
positive "physical core count" "$cores"

# k: every divisor of the cores; with more than 8, keep 1, N and 6 spread evenly between.
if [[ -n ${NANO_BENCH_KS:-} ]]; then
  ks=$NANO_BENCH_KS
else
  ks=$("$python" - "$cores" <<'EOF'
import sys
n = int(sys.argv[1])
d = [k for k in range(1, n + 1) if n % k == 0]
if len(d) > 8:
    mid = d[1:-1]
    d = [1] + sorted({mid[round(i * (len(mid) - 1) / 5)] for i in range(6)}) + [n]
print(",".join(map(str, d)))
EOF
)
fi

mkdir -p "$out"
rm -f "$out"/raw.json "$out"/sub-*.txt "$out"/results.* "$out"/throughput*
load() { cut -d' ' -f1-3 /proc/loadavg; }
loadavg_start=$(load)
echo "bench: $cores physical cores, ranks k in {$ks}; LeNet $lenet_steps steps x $lenet_repeats, ResNet-18 $resnet_steps steps x $resnet_repeats" >&2

status=0
"$python" bench/python/run.py --build "$build" --out "$out/raw.json" --cores "$cores" --ks "$ks" --models "$models" \
  --lenet-steps "$lenet_steps" --resnet-steps "$resnet_steps" --lenet-repeats "$lenet_repeats" \
  --resnet-repeats "$resnet_repeats" || status=1

# The earlier issues' benchmarks, their tables kept verbatim.
sub() {
  local name=$1; shift
  echo "bench: $*" >&2
  local rc=0
  "$@" >"$out/sub-$name.txt" 2>&1 || rc=$?
  if (( rc != 0 )); then
    status=1
    echo "(exit status $rc: $*)" >>"$out/sub-$name.txt"
  fi
}
if [[ ${NANO_BENCH_SUB:-1} != 0 ]]; then
  sub launcher scripts/bench.sh launcher "$build" 5
  sub allreduce scripts/bench.sh allreduce "$build" 44 9
  if [[ ${NANO_BENCH_DDP:-1} != 0 ]]; then sub ddp scripts/bench.sh ddp "$build" 30 1; fi
  sub balance scripts/bench.sh balance "$build" "$lenet_steps" "$lenet_repeats" 30
fi

# Machine description for results.json.
"$python" - "$out/meta.json" "$cores" "$ks" "$command_line" "$loadavg_start" "$(load)" \
  "$lenet_steps" "$resnet_steps" "$lenet_repeats" "$resnet_repeats" "$("$build/bin/nano-init" --show-topology)" \
  "$("$build/bin/nano-init" --show-topology --json 2>/dev/null || true)" <<'EOF'
import datetime, json, os, platform, re, subprocess, sys
(path, cores, ks, command, load0, load1, ls, rs, lr, rr, topo, topo_json) = sys.argv[1:]
plain = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
def sh(*argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
osr = dict(l.rstrip().split("=", 1) for l in open("/etc/os-release") if "=" in l)
try:
    numa = json.loads(topo_json)["numa_nodes"]
except (ValueError, KeyError):  # a nano-init built before --show-topology --json
    found = re.search(r"NUMA nodes:\s+(\d+)", topo)
    numa = int(found.group(1)) if found else None
meta = {
    "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    "command": command,
    "machine": {
        "hostname": platform.node(), "cpu_model": cpu, "physical_cores": int(cores), "logical_cpus": os.cpu_count(),
        "numa_nodes": numa, "memory_gib": round(mem / 2**20, 1),
        "os": osr.get("PRETTY_NAME", "").strip('"'), "kernel": platform.release(), "topology": topo,
        "libtorch": sh("dpkg-query", "-W", "-f=${Version}", "libtorch-dev"),
        "python_torch": sh("/usr/bin/python3", "-c", "import torch; print(torch.__version__)"),
        "libtorch_default_threads": subprocess.run(
            ["/usr/bin/python3", "-c", "import torch; print(torch.get_num_threads())"], env=plain,
            capture_output=True, text=True).stdout.strip() or None,
        "openmpi": (sh("mpirun", "--version").splitlines() or [""])[0],
        "loadavg_start": load0, "loadavg_end": load1,
    },
    "settings": {"batch_per_rank": 64, "ks": [int(k) for k in ks.split(",")], "lenet_steps": int(ls),
                 "resnet_steps": int(rs), "lenet_repeats": int(lr), "resnet_repeats": int(rr)},
}
json.dump(meta, open(path, "w"), indent=1)
EOF

[[ -f $out/raw.json ]] || { echo "bench: no measurements were written" >&2; exit 1; }
"$python" bench/python/report.py "$out"
term=png
gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo && term=pngcairo
gnuplot -e "dir='$out'; term='$term'; models='${models//,/ }'" bench/scripts/throughput.gp || { echo "bench: gnuplot failed" >&2; status=1; }
cat "$out/results.md"
echo
echo "bench: wrote $out/results.json, $out/results.md, $out/throughput.png" >&2
exit $status
