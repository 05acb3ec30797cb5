"""The body of scripts/bench.sh precision (see bench/scripts/precision.sh for what it measures).
  precision.py measure BUILD OUT.json accuracy|no-accuracy   one platform's measurements
  precision.py report OUT RUNS                                the side-by-side table"""
import json
import os
import platform
import re
import subprocess
import sys

RESULT = re.compile(r"nano-result: (\{.*?\})\s*$", re.M)
CONFIGS = [("fp32", []), ("bf16", ["--precision", "bf16"]), ("channels_last", ["--channels-last"]),
           ("bf16 + channels_last", ["--precision", "bf16", "--channels-last"]),
           ("bf16 gradients", ["--bf16-gradients"])]
MODELS = {
    "ResNet-18": ["resnet18_cifar", "--steps", "15", "--batch-size", "64"],
    "LeNet": ["fashion_mnist_nano", "--epochs", "1", "--max-steps-per-epoch", "200", "--test-limit", "200",
              "--equal-batches"],
}
RANKS = [1, 2]


def nano_result(command, env=None, timeout=1200):
    p = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    m = RESULT.search(p.stdout)
    if p.returncode != 0 or not m:
        sys.stderr.write(f"bench precision: {' '.join(command)} failed (exit {p.returncode})\n{p.stderr[-2000:]}\n")
        return None
    return json.loads(m.group(1))


def measure(build, out, with_accuracy):
    bin_dir = os.path.join(build, "bin")
    nano_run = os.path.join(bin_dir, "nano-run")
    res = {"torch": subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip(),
           "os": platform.freedesktop_os_release().get("PRETTY_NAME", "?") if hasattr(platform,
                                                                                     "freedesktop_os_release") else "?",
           "throughput": {}, "accuracy": {}, "fpmath": {}}
    # Interleaved: every configuration of one model and rank count in turn, so a drift of the
    # machine's speed hits them alike.
    for model, program in MODELS.items():
        for ranks in RANKS:
            for name, flags in CONFIGS:
                if name == "bf16 gradients" and ranks == 1:
                    continue  # nothing is exchanged
                r = nano_result([nano_run, "-n", str(ranks), os.path.join(bin_dir, program[0])] + program[1:] + flags)
                key = f"{model}|{ranks}|{name}"
                res["throughput"][key] = r["images_per_sec"] if r else None
                print(f"{key}: {res['throughput'][key]}", file=sys.stderr)
    if with_accuracy == "accuracy":
        for name, flags in CONFIGS:
            r = nano_result([os.path.join(bin_dir, "fashion_mnist_nano"), "--num-processes", "2", "--epochs", "3",
                             "--batch-size", "128", "--equal-batches"] + flags)
            res["accuracy"][name] = r["accuracy"] if r else None
            print(f"accuracy {name}: {res['accuracy'][name]}", file=sys.stderr)
    # Stock PyTorch, one process on every core: oneDNN's implicit bf16 (oneDNN >= 3.0 reads it).
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch_ddp.py")
    for model, steps in (("resnet18", "15"), ("lenet", "200")):
        for mode in ("default", "BF16"):
            env = dict(os.environ)
            env.pop("ONEDNN_DEFAULT_FPMATH_MODE", None)
            if mode == "BF16":
                env["ONEDNN_DEFAULT_FPMATH_MODE"] = "BF16"
            r = nano_result(["/usr/bin/python3", script, model, "--single", "--steps", steps], env=env)
            res["fpmath"][f"{model}|{mode}"] = r["images_per_sec"] if r else None
            print(f"fpmath {model} {mode}: {res['fpmath'][f'{model}|{mode}']}", file=sys.stderr)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


def span(values, digits):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}" if f"{lo:.{digits}f}" == f"{hi:.{digits}f}" else f"{lo:.{digits}f}-{hi:.{digits}f}"


def report(out, runs):
    platforms = [("debian12", "Debian 12"), ("debian13", "Debian 13")]
    data = {p: [] for p, _ in platforms}
    for p, _ in platforms:
        for r in range(1, runs + 1):
            try:
                with open(os.path.join(out, f"{p}-run-{r}.json")) as f:
                    data[p].append(json.load(f))
            except (OSError, ValueError):
                pass
    heads = []
    for p, label in platforms:
        torch = data[p][0]["torch"] if data[p] else "?"
        heads.append(f"{label} (torch {torch})")
    print(f"Training throughput, img/s, and the ratio to fp32 in the same run ({runs} runs: min-max)\n")
    print("| model | ranks | configuration | " + " | ".join(f"{h} img/s | x fp32" for h in heads) + " |")
    print("|---|---|---|" + "---|---|" * len(platforms))
    for model in MODELS:
        for ranks in RANKS:
            for name, _ in CONFIGS:
                if name == "bf16 gradients" and ranks == 1:
                    continue
                cells = []
                for p, _ in platforms:
                    key = f"{model}|{ranks}|{name}"
                    rates = [d["throughput"].get(key) for d in data[p]]
                    ratios = []
                    for d in data[p]:
                        base, v = d["throughput"].get(f"{model}|{ranks}|fp32"), d["throughput"].get(key)
                        ratios.append(v / base if v and base else None)
                    cells += [span(rates, 1), span(ratios, 2)]
                print(f"| {model} | {ranks} | {name} | " + " | ".join(cells) + " |")
    print("\nLeNet on Fashion-MNIST, 2 ranks, 3 epochs, batch 128 per rank, equal batches: final test accuracy\n")
    print("| configuration | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(platforms))
    for name, _ in CONFIGS:
        cells = []
        for p, _ in platforms:
            values = [d["accuracy"].get(name) for d in data[p] if d["accuracy"]]
            cells.append(span(values, 4))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nStock PyTorch, one process on all cores: ONEDNN_DEFAULT_FPMATH_MODE=BF16 against unset, img/s\n")
    print("| model | " + " | ".join(f"{h} unset | BF16 | ratio" for h in heads) + " |")
    print("|---|" + "---|---|---|" * len(platforms))
    for model in ("resnet18", "lenet"):
        cells = []
        for p, _ in platforms:
            a = [d["fpmath"].get(f"{model}|default") for d in data[p]]
            b = [d["fpmath"].get(f"{model}|BF16") for d in data[p]]
            ratio = [y / x if x and y else None for x, y in zip(a, b)]
            cells += [span(a, 1), span(b, 1), span(ratio, 2)]
        print(f"| {model} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if sys.argv[1] == "measure":
        measure(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "report":
        report(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit("usage: precision.py measure BUILD OUT.json accuracy|no-accuracy | report OUT RUNS")
