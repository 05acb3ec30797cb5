"""The body of scripts/bench.sh tune (see bench/scripts/tune.sh for what it measures)."""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

build, tunings, sweeps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
nano_run = os.path.join(build, "bin", "nano-run")
allocators = ["jemalloc", "system"]
models = {
    "ResNet-18": [os.path.join(build, "bin", "resnet18_cifar"), "--steps", "12", "--batch-size", "32"],
    "LeNet/Fashion-MNIST": [os.path.join(build, "bin", "fashion_mnist_nano"), "--epochs", "1",
                            "--max-steps-per-epoch", "250", "--test-limit", "200"],
}
RESULT = re.compile(r"nano-result: (\{.*?\})\s*$", re.M)


def candidates():
    out = subprocess.run([nano_run, "--tune", "--dry-run", "--tune-allocators", ",".join(allocators), "--",
                          models["ResNet-18"][0]], capture_output=True, text=True, check=True).stdout
    layouts = []
    for line in out.splitlines()[1:]:
        m = re.match(r"\s+(\d+) ranks? x \d+ threads?, (\w+)", line)
        if m:
            layouts.append((int(m.group(1)), m.group(2)))
    return layouts


def sweep_run(program, ranks, allocator):
    p = subprocess.run([nano_run, "-n", str(ranks), "--allocator", allocator, "--backend", "subprocess"] + program,
                       capture_output=True, text=True, timeout=1800)
    m = RESULT.search(p.stdout)
    if p.returncode != 0 or not m:
        return None
    return json.loads(m.group(1))["images_per_sec"]


def tune(program, cache):
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    t0 = time.monotonic()
    p = subprocess.run([nano_run, "--tune", "--backend", "subprocess", "--tune-allocators", ",".join(allocators),
                        "--"] + program, capture_output=True, text=True, env=env, timeout=1800)
    seconds = time.monotonic() - t0
    if p.returncode != 0:
        return None, seconds
    with open(os.path.join(cache, "nano", "tune.json")) as f:
        layout = json.load(f)["entries"][-1]["layout"]
    return (layout["ranks"], layout["allocator"]), seconds


layouts = candidates()
print(f"nano-run --tune against an exhaustive sweep; {os.cpu_count()} CPUs, "
      f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; layouts: "
      + ", ".join(f"{k} x {a}" for k, a in layouts))
for name, program in models.items():
    runs = {layout: [] for layout in layouts}
    chosen, costs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(max(sweeps, tunings)):
            if round_ < sweeps:
                for layout in layouts:
                    rate = sweep_run(program, *layout)
                    if rate is not None:
                        runs[layout].append(rate)
            if round_ < tunings:
                cache = os.path.join(tmp, f"cache-{round_}")
                pick, seconds = tune(program, cache)
                chosen.append(pick)
                costs.append(seconds)
    medians = {layout: statistics.median(r) for layout, r in runs.items() if r}
    best = max(medians, key=medians.get)
    print(f"\n{name}: {' '.join(program[1:])}")
    print(f"  {'layout':<22} {'img/s (sweep median)':>22} {'vs best':>8}  runs")
    for layout in layouts:
        rate = medians.get(layout)
        mark = "*" if layout == best else " "
        if rate is None:
            print(f"{mark} {layout[0]} ranks x {layout[1]:<10} {'failed':>22}")
        else:
            spread = f"{min(runs[layout]):.1f}-{max(runs[layout]):.1f}"
            print(f"{mark} {layout[0]} ranks x {layout[1]:<10} {rate:>22.1f} {rate / medians[best]:>8.3f}  {spread}")
    ratios = [medians[c] / medians[best] if c in medians else 0.0 for c in chosen if c is not None]
    picks = [f"{c[0]} x {c[1]}" if c else "failed" for c in chosen]
    agree = max(chosen.count(c) for c in chosen) if chosen else 0
    print(f"  --tune picked: {', '.join(picks)}; agreement {agree}/{len(chosen)}")
    if ratios:
        print(f"  picked / best (sweep's figures): {min(ratios):.3f}-{max(ratios):.3f} (goal >= 0.95)")
    print(f"  tuning cost: {min(costs):.0f}-{max(costs):.0f} s per tuning "
          f"(median {statistics.median(costs):.0f} s)")
