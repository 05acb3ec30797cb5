#!/usr/bin/env bash
# Scaling over the cores of one host: stock PyTorch DDP (LeNet, ResNet-18) at k = 1, 2, 4, ...
# ranks on Gloo against the `nano` torch backend, k ranks sharing every CPU and k ranks on one
# core each, then the all-reduce itself at the largest k (bench/python/scaling.py says how).
# Needs only a Python with torch, a C++ compiler and taskset: it builds nano_torch for that
# Python's torch first (bench/python/build_nano_torch.py, into a folder removed at the end), so it
# runs on a big machine with a pip-installed torch and nothing else of nano's.
# Usage: scripts/bench.sh scaling [scaling.py options: --ranks 1,2,4,8,16 --repeats 2
#                                  --budget SECONDS --json FILE --data-dir DIR ...]
#   NANO_PYTHON   the Python (default: Debian's /usr/bin/python3 where it has torch, else python3)
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start scaling "$@"
py=${NANO_PYTHON:-}
if [[ -z $py ]]; then
  py=python3
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then py=/usr/bin/python3; fi
fi
"$py" -c 'import torch' || { echo "bench scaling: $py has no torch (set NANO_PYTHON)" >&2; exit 2; }
command -v taskset >/dev/null || { echo "bench scaling: taskset not found (util-linux)" >&2; exit 2; }

echo "torch $("$py" -c 'import torch; print(torch.__version__)'), $(getconf _NPROCESSORS_ONLN) CPUs," \
  "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(date -u '+%Y-%m-%d %H:%M UTC')"
work=$(mktemp -d /tmp/nano-scaling.XXXXXX)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
if "$py" bench/python/build_nano_torch.py "$work" >"$work/build.log" 2>&1; then
  echo "nano_torch built in $(( $(date +%s) - start )) s"
  nano_torch=$work
else
  echo "bench scaling: building nano_torch failed; Gloo only. The build's last lines:" >&2
  tail -40 "$work/build.log" >&2
  nano_torch=
fi
"$py" bench/python/scaling.py --python "$py" --nano-torch "$nano_torch" "$@"
