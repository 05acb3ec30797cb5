"""Side-by-side summary of scripts/bench.sh platforms: for each platform, the key numbers of
every run (results.json of scripts/bench.sh training) as min-max ranges. Usage: platforms.py OUT RUNS"""
import json
import os
import re
import sys

PLATFORMS = [("debian12", "Debian 12 (libtorch 1.13, Open MPI 4.1)"), ("debian13", "Debian 13 (libtorch 2.6, Open MPI 5)")]


def load(out, platform, run):
    path = os.path.join(out, f"{platform}-run-{run}", "results.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def metrics(res):
    """Metric name -> value for one run."""
    m = {}
    cores = res["machine"]["physical_cores"]
    for model, d in res["models"].items():
        top = next((row for row in d["by_ranks"] if row["k"] == cores), None)
        m[f"{model}: 1 process x 1 thread, img/s"] = d["per_core_base"]["images_per_sec"]
        m[f"{model}: 1 process x all cores, img/s"] = d["one_process_all_cores"]["images_per_sec"]
        if top:
            for kind in ("nano-mpi", "nano-subprocess", "pytorch"):
                m[f"{model}: {kind} -n {cores}, img/s"] = top[kind]["images_per_sec"]
                m[f"{model}: {kind} -n {cores} / 1 process all cores"] = top[kind]["speedup_vs_1proc_all_cores"]
    subs = res.get("sub_benchmarks", {})
    for line in subs.get("allreduce", "").splitlines():
        hit = re.match(r"(nano MPI|nano Gloo|c10d ProcessGroupGloo)\b.*?\s([0-9.]+)\s+[0-9.]+\s*$", line)
        if hit:
            m[f"all-reduce 44 MB, {hit.group(1)}, ms (median)"] = float(hit.group(2))
    worst = {}
    for line in subs.get("ddp", "").splitlines():
        f = line.split()
        if len(f) >= 7 and f[0] in ("lenet", "resnet18") and f[1] in ("mpi", "gloo"):
            try:
                key = f"DDP step / slowest no-sync step, {f[0]} {f[1]}"
                worst[key] = max(worst.get(key, 0.0), float(f[6]))
            except ValueError:
                pass
    m.update(worst)
    return m


def span(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    digits = 3 if hi < 10 else 1
    return f"{lo:.{digits}f}" if lo == hi else f"{lo:.{digits}f}-{hi:.{digits}f}"


def main():
    out, runs = sys.argv[1], int(sys.argv[2])
    per = {p: [metrics(r) for r in (load(out, p, i) for i in range(1, runs + 1)) if r] for p, _ in PLATFORMS}
    names = []
    for p, _ in PLATFORMS:
        for run in per[p]:
            names += [n for n in run if n not in names]
    print(f"| metric ({runs} interleaved runs each; min-max) | " + " | ".join(t for _, t in PLATFORMS) + " |")
    print("|---|" + "---|" * len(PLATFORMS))
    for n in names:
        print(f"| {n} | " + " | ".join(span([run.get(n) for run in per[p]]) for p, _ in PLATFORMS) + " |")


if __name__ == "__main__":
    main()
