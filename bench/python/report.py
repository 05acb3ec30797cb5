#!/usr/bin/python3
"""Turns scripts/bench.sh's raw measurements into results.json, results.md and the data files of
the throughput chart. Medians over repeats; derived numbers:
  speed-up      = throughput / throughput(1 process x all cores)
  efficiency    = throughput(k = N) / (N x throughput(1 process x 1 thread)), N = physical cores
  vs PyTorch    = nano's throughput / stock PyTorch DDP's throughput at the same k
Usage: report.py OUT_DIR  (reads OUT_DIR/raw.json, OUT_DIR/meta.json, OUT_DIR/sub-*.txt)
"""
import json
import os
import statistics
import sys

MODELS = {"lenet": "LeNet / Fashion-MNIST (1x28x28)", "resnet18": "ResNet-18 / synthetic 3x32x32"}
LAUNCHERS = [("nano-mpi", "nano-run --backend mpi"), ("nano-subprocess", "nano-run --backend subprocess"),
             ("pytorch", "stock PyTorch DDP (Gloo)")]
# Goals from the benchmark issue (2-core machine); speed-up and vs-PyTorch goals hold anywhere.
EFFICIENCY_GOAL = {"lenet": 0.97, "resnet18": 0.95}
SUBBENCH = [("launcher", "Launcher start-up (scripts/bench.sh launcher)"),
            ("allreduce", "All-reduce, 2 ranks (scripts/bench.sh allreduce)"),
            ("ddp", "DDP overhead, 2 ranks (scripts/bench.sh ddp)"),
            ("balance", "Batch balancing against a noisy neighbour (scripts/bench.sh balance)")]


def median(values):
    return statistics.median(values) if values else None


def fmt(v, digits=1):
    return "n/a" if v is None else f"{v:.{digits}f}"


def ratio(a, b):
    return a / b if a is not None and b else None


def derive(runs, model, cores):
    """Medians and derived numbers of one model."""
    by = {}
    for r in runs:
        if r["model"] == model:
            by.setdefault((r["kind"], r["k"]), []).append(r)
    med = {key: median([r["images_per_sec"] for r in rs if "images_per_sec" in r]) for key, rs in by.items()}
    threads = {}
    for key, rs in by.items():
        for r in rs:
            t = r.get("result", {}).get("threads")
            if t is not None:
                threads[key] = t
    base, all_cores = med.get(("base", 1)), med.get(("all", 1))
    nano_base = med.get(("nano-base", 1))
    independent = next(((k, t) for (kind, k), t in med.items() if kind == "independent"), (None, None))
    ks = sorted({k for (kind, k) in med if kind not in ("base", "nano-base", "all", "independent", "pytorch-base")})
    pytorch_base = med.get(("pytorch-base", 1))
    rows = []
    for k in ks:
        row = {"k": k}
        torch_k = med.get(("pytorch", k))
        for kind, _ in LAUNCHERS:
            t = med.get((kind, k))
            row[kind] = {"images_per_sec": t, "threads_per_rank": threads.get((kind, k)),
                         "speedup_vs_1proc_all_cores": ratio(t, all_cores),
                         "repeats": [r.get("images_per_sec") for r in by.get((kind, k), [])]}
            if kind != "pytorch":
                row[kind]["vs_pytorch"] = ratio(t, torch_k)
        rows.append(row)
    eff, nano_eff = {}, {}
    for kind, _ in LAUNCHERS:
        t = med.get((kind, cores))
        eff[kind] = ratio(t, cores * base) if base else None
        nano_eff[kind] = ratio(t, cores * nano_base) if nano_base else None
    return {
        "name": MODELS[model],
        "per_core_base": {"images_per_sec": base, "threads": threads.get(("base", 1)),
                          "repeats": [r.get("images_per_sec") for r in by.get(("base", 1), [])]},
        "one_process_all_cores": {"images_per_sec": all_cores, "threads": threads.get(("all", 1)),
                                  "repeats": [r.get("images_per_sec") for r in by.get(("all", 1), [])]},
        "independent_ranks": {"k": independent[0], "images_per_sec": independent[1],
                              "scaling_efficiency": ratio(independent[1], independent[0] * base)
                              if base and independent[0] else None,
                              "nano_vs_independent": {kind: ratio(med.get((kind, independent[0])), independent[1])
                                                      for kind in ("nano-mpi", "nano-subprocess")},
                              # Per repeat: each rank's own rate; the spread is fastest / slowest.
                              "ranks_per_repeat": [r["result"]["ranks"] for r in by.get(("independent", independent[0]), [])
                                                   if r.get("result", {}).get("ranks")]},
        # The same runs' step times, each step taken as the slowest rank's (bench/python/run.py):
        # what synchronous ranks would reach with a free exchange.
        "synchronous_ceiling": synchronous_ceiling(by.get(("independent", independent[0]), []), base,
                                                   independent[0], med),
        # Stock PyTorch against its own one-process, one-thread base (the same Python program).
        "pytorch_per_core_base": {"images_per_sec": pytorch_base,
                                  "scaling_efficiency_of_pytorch": ratio(med.get(("pytorch", cores)),
                                                                         cores * pytorch_base) if pytorch_base else None,
                                  "repeats": [r.get("images_per_sec") for r in by.get(("pytorch-base", 1), [])]},
        "nano_per_core_base": {"images_per_sec": nano_base,
                               "repeats": [r.get("images_per_sec") for r in by.get(("nano-base", 1), [])]},
        "by_ranks": rows,
        "scaling_efficiency_at_all_cores": eff,
        "scaling_efficiency_vs_nano_base": nano_eff,
    }


def synchronous_ceiling(runs, base, k, med):
    rates = [r["result"]["sync_ceiling_images_per_sec"] for r in runs
             if r.get("result", {}).get("sync_ceiling_images_per_sec")]
    if not rates or not k:
        return None
    t = median(rates)
    return {"images_per_sec": t, "repeats": rates, "scaling_efficiency": ratio(t, k * base) if base else None,
            "nano_vs_ceiling": {kind: ratio(med.get((kind, k)), t) for kind in ("nano-mpi", "nano-subprocess")}}


def goals(model, d, cores):
    """(goal text, measured text, met?) rows for one model."""
    out = []
    top = next((r for r in d["by_ranks"] if r["k"] == cores), None)
    if top is None:
        return out
    torch_speedup = top["pytorch"]["speedup_vs_1proc_all_cores"]
    for kind in ("nano-mpi", "nano-subprocess"):
        s = top[kind]["speedup_vs_1proc_all_cores"]
        out.append((f"{kind} speed-up at n={cores} >= PyTorch DDP's ({fmt(torch_speedup, 2)}x)", f"{fmt(s, 2)}x",
                    s is not None and torch_speedup is not None and s >= torch_speedup))
        e = d["scaling_efficiency_at_all_cores"][kind]
        measured = fmt(e, 3)
        sc, ind = d.get("synchronous_ceiling"), d.get("independent_ranks", {})
        if ind.get("scaling_efficiency") is not None and ind.get("k") == cores:
            measured += f" (no-communication ranks: {fmt(ind['scaling_efficiency'], 3)}"
            measured += f"; synchronous ceiling: {fmt(sc['scaling_efficiency'], 3)})" if sc else ")"
        own = d.get("pytorch_per_core_base", {}).get("scaling_efficiency_of_pytorch")
        if own is not None:
            measured += f"; PyTorch against its own base: {fmt(own, 3)}"
        out.append((f"{kind} scaling efficiency >= {EFFICIENCY_GOAL[model]:.2f}", measured,
                    e is not None and e >= EFFICIENCY_GOAL[model]))
        worst = [r[kind]["vs_pytorch"] for r in d["by_ranks"]]
        ok = all(v is not None and v >= 1.0 for v in worst)
        out.append((f"{kind} >= 1.0x PyTorch DDP at every k",
                    ", ".join(f"k={r['k']}: {fmt(r[kind]['vs_pytorch'], 2)}x" for r in d["by_ranks"]), ok))
    return out


def markdown(res):
    m, s = res["machine"], res["settings"]
    cores = m["physical_cores"]
    lines = [f"# nano benchmark results", "",
             f"- machine: {m['cpu_model']}, {cores} physical cores ({m['logical_cpus']} logical CPUs, "
             f"{m['numa_nodes']} NUMA node(s)), {m['memory_gib']} GiB, {m['os']}, kernel {m['kernel']}",
             f"- software: libtorch {m['libtorch']}, python3-torch {m['python_torch']}, {m['openmpi']}",
             f"- date: {res['date']}; load average at start {m['loadavg_start']}, at end {m['loadavg_end']}",
             f"- command: `{res['command']}`",
             f"- batch {s['batch_per_rank']} per rank; timed steps per rank: LeNet {s['lenet_steps']}, "
             f"ResNet-18 {s['resnet_steps']} (warm-up steps excluded); median of {s['lenet_repeats']} (LeNet) / "
             f"{s['resnet_repeats']} (ResNet-18) interleaved repeats; ranks k in {s['ks']}",
             f"- rows: *1 process x 1 thread* = OMP_NUM_THREADS=1, taskset to one core; *1 process x all cores* = "
             f"OMP_NUM_THREADS={cores}, no nano-run (this libtorch's own default is "
             f"{m.get('libtorch_default_threads', '?')} thread(s) here); *nano-run* = `nano-run -n k --backend B`; "
             f"*PyTorch DDP* = bench/python/pytorch_ddp.py (same model, optimizer, batch, warm-up and timed steps, "
             f"Gloo), rank r pinned with taskset to the CPUs nano-run's plan gives rank r, OMP_NUM_THREADS = its cores",
             "- the LeNet program (fashion_mnist_nano) started without nano-run trains through nano's in-program "
             "launcher as one rank; ResNet-18 (resnet18_cifar) started plainly is an ordinary single process",
             "- a load average well above 0 at start means other work shared the cores: treat the numbers as noisy",
             ""]
    for model, d in res["models"].items():
        base, allc = d["per_core_base"], d["one_process_all_cores"]
        lines += [f"## {d['name']}", "",
                  f"Per-core base (1 process x 1 thread, pinned): **{fmt(base['images_per_sec'])} img/s**; "
                  f"1 process x all cores ({allc['threads'] if allc['threads'] is not None else '?'} threads, "
                  f"OMP_NUM_THREADS={cores}, no nano-run): **{fmt(allc['images_per_sec'])} img/s**"
                  f" ({fmt(ratio(allc['images_per_sec'], base['images_per_sec']), 2)}x the base).", "",
                  "| ranks k | threads/rank | nano mpi img/s | nano subprocess img/s | PyTorch DDP img/s "
                  "| speed-up nano mpi | speed-up nano subprocess | speed-up PyTorch | nano mpi / PyTorch "
                  "| nano subprocess / PyTorch |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in d["by_ranks"]:
            t = r["nano-mpi"]["threads_per_rank"] or r["pytorch"]["threads_per_rank"]
            lines.append(
                f"| {r['k']} | {t if t is not None else 'n/a'} | {fmt(r['nano-mpi']['images_per_sec'])} | "
                f"{fmt(r['nano-subprocess']['images_per_sec'])} | {fmt(r['pytorch']['images_per_sec'])} | "
                f"{fmt(r['nano-mpi']['speedup_vs_1proc_all_cores'], 2)}x | "
                f"{fmt(r['nano-subprocess']['speedup_vs_1proc_all_cores'], 2)}x | "
                f"{fmt(r['pytorch']['speedup_vs_1proc_all_cores'], 2)}x | {fmt(r['nano-mpi']['vs_pytorch'], 2)}x | "
                f"{fmt(r['nano-subprocess']['vs_pytorch'], 2)}x |")
        e = d["scaling_efficiency_at_all_cores"]
        lines += ["", f"Scaling efficiency at k = {cores} (throughput / ({cores} x per-core base)): "
                      f"nano mpi {fmt(e['nano-mpi'], 3)}, nano subprocess {fmt(e['nano-subprocess'], 3)}, "
                      f"PyTorch DDP {fmt(e['pytorch'], 3)}.", ""]
        nb = d.get("nano_per_core_base", {}).get("images_per_sec")
        if nb:
            ne = d["scaling_efficiency_vs_nano_base"]
            lines += [f"Against nano's own per-core base (`nano-run`, one rank on the same core, nano's allocator "
                      f"and binding: **{fmt(nb)} img/s**, {fmt(ratio(nb, base['images_per_sec']), 2)}x the plain "
                      f"base), which leaves out the recipe's own gain: nano mpi {fmt(ne['nano-mpi'], 3)}, "
                      f"nano subprocess {fmt(ne['nano-subprocess'], 3)}.", ""]
        pb = d.get("pytorch_per_core_base", {})
        if pb.get("images_per_sec"):
            longer = ratio(base["images_per_sec"], pb["images_per_sec"])
            lines += [f"Stock PyTorch against its own per-core base (the same Python program as one plain process, "
                      f"pinned, 1 thread: **{fmt(pb['images_per_sec'])} img/s**): "
                      f"{fmt(pb['scaling_efficiency_of_pytorch'], 3)} at k = {cores}. Its one-thread steps take "
                      f"{fmt(longer, 1)}x as long as the plain C++ program's"
                      + (", so the same exchange and waits weigh less in them." if longer and longer > 1.2 else ".")
                      , ""]
        ind = d.get("independent_ranks", {})
        if ind.get("images_per_sec"):
            v = ind["nano_vs_independent"]
            lines += [f"The machine's own ceiling: {ind['k']} ranks under nano-run, each told it is a world of one "
                      f"(same binding and allocator, no communication), together ran **{fmt(ind['images_per_sec'])} "
                      f"img/s** = {fmt(ind['scaling_efficiency'], 3)} of {ind['k']} x the per-core base. nano's "
                      f"{ind['k']} synchronised ranks reach {fmt(v['nano-mpi'], 3)} (mpi) and "
                      f"{fmt(v['nano-subprocess'], 3)} (subprocess) of that: what remains is what the "
                      f"gradient exchange and waiting for the slowest rank cost.", ""]
            sc = d.get("synchronous_ceiling")
            if sc:
                v = sc["nano_vs_ceiling"]
                lines += [f"Synchronous ceiling: had those ranks waited for one another after every step, with "
                          f"equal batches and a free exchange (each step as long as the slowest rank's same step), "
                          f"they would have run **{fmt(sc['images_per_sec'])} img/s** = "
                          f"{fmt(sc['scaling_efficiency'], 3)} of {ind['k']} x the per-core base (repeats: "
                          f"{', '.join(fmt(x) for x in sc['repeats'])}). That is what synchronous data-parallel "
                          f"training with equal batches can reach on these cores at this time. nano reaches "
                          f"{fmt(v['nano-mpi'], 3)} (mpi) and {fmt(v['nano-subprocess'], 3)} (subprocess) of it: "
                          f"below 1 by what the exchange costs, above 1 where batch balancing wins back more.", ""]
            spreads = [max(rs) / min(rs) for rs in ind.get("ranks_per_repeat", []) if rs and min(rs) > 0]
            if spreads:
                lines += [f"In those runs the fastest rank ran {', '.join(fmt(x, 3) for x in spreads)}x as fast as "
                          f"the slowest (per repeat): the cores themselves differ, and a synchronous step waits for "
                          f"the slowest; nano's batch balancing gives the slower ranks fewer samples per step.", ""]
        g = goals(model, d, cores)
        if g:
            lines += ["| goal | measured | met |", "|---|---|---|"]
            lines += [f"| {a} | {b} | {'yes' if ok else 'NO'} |" for a, b, ok in g]
            lines.append("")
    failed = [r for r in res["runs"] if "images_per_sec" not in r]
    if failed:
        lines += ["## Failed runs", ""]
        for r in failed:
            lines += [f"- {r['model']} {r['kind']} k={r['k']} (exit {r['exit_code']}): `{r['command']}`", "",
                      "```", r.get("error", ""), "```", ""]
    for key, title in SUBBENCH:
        text = res["sub_benchmarks"].get(key)
        if text is not None:
            lines += [f"## {title}", "", "```", text.strip(), "```", ""]
    lines += ["![images/s against ranks](throughput.png)", ""]
    return "\n".join(lines)


def write_plot_data(res, out):
    """One file per model: k, nano mpi, nano subprocess, PyTorch DDP, 1 process x all cores,
    physical cores x per-core base (perfect scaling)."""
    cores = res["machine"]["physical_cores"]
    for model, d in res["models"].items():
        with open(os.path.join(out, f"throughput-{model}.dat"), "w") as f:
            f.write("# k nano-mpi nano-subprocess pytorch-ddp one-process-all-cores ideal\n")
            base = d["per_core_base"]["images_per_sec"]
            for r in d["by_ranks"]:
                vals = [r[kind]["images_per_sec"] for kind, _ in LAUNCHERS]
                vals.append(d["one_process_all_cores"]["images_per_sec"])
                vals.append(cores * base if base else None)
                f.write(" ".join([str(r["k"])] + ["NaN" if v is None else f"{v:.3f}" for v in vals]) + "\n")


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "raw.json")) as f:
        raw = json.load(f)
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    cores = meta["machine"]["physical_cores"]
    models = sorted({r["model"] for r in raw["runs"]}, key=list(MODELS).index)
    res = {**meta, "plans": raw["plans"], "models": {m: derive(raw["runs"], m, cores) for m in models},
           "runs": raw["runs"], "sub_benchmarks": {}}
    for key, _ in SUBBENCH:
        path = os.path.join(out, f"sub-{key}.txt")
        if os.path.exists(path):
            with open(path) as f:
                res["sub_benchmarks"][key] = f.read()
    res["goals"] = {m: [{"goal": a, "measured": b, "met": ok} for a, b, ok in goals(m, d, cores)]
                    for m, d in res["models"].items()}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(markdown(res))
    write_plot_data(res, out)


if __name__ == "__main__":
    main()
