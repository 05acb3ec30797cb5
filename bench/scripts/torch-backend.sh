#!/usr/bin/env bash
# The `nano` torch.distributed backend (import nano_torch; init_process_group("nano")) against
# Gloo, for stock PyTorch programs on python3-torch, 2 ranks pinned one per core:
#  1. all-reduce of 4, 44 and 200 MB float32 through torch.distributed on `nano` and on `gloo`
#     (one pair of processes, both groups, interleaved repeats), and through nano's own C++
#     communicator (nano_bench_allreduce, the Gloo communicator over shared memory);
#  2. stock DDP training (bench/python/pytorch_ddp.py: LeNet on Fashion-MNIST, ResNet-18 on
#     3x32x32) under `nano-run -n 2`, on `gloo` and on `nano`, interleaved repeats.
# Goals: at 44 MB nano <= 0.3 x Gloo's time and <= 1.2 x nano's C++ communicator's; DDP on nano
# at least as fast as on gloo for every model. Prints medians with min-max over the repeats.
# Usage: scripts/bench.sh torch-backend [BUILD_DIR] [REPS] [REPEATS] [LENET_STEPS] [RESNET_STEPS]
#   REPS      timed all-reduces per size and path (default 9, after 2 warm-ups)
#   REPEATS   training runs per model and backend (default 3)
#   LENET_STEPS, RESNET_STEPS   timed steps per training run (default 150, 6)
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start torch-backend "$@"
build=$(bench_build_dir "${1:-}")
reps=${2:-9}
repeats=${3:-3}
lenet_steps=${4:-150}
resnet_steps=${5:-6}
pydir=$build/lib/nano/python
bin=$build/bench/nano_bench_allreduce
[[ -f $pydir/nano_torch/__init__.py ]] || { echo "bench torch-backend: $pydir/nano_torch not built (python3-torch and pybind11-dev, then cmake --build $build)" >&2; exit 2; }
[[ -x $bin ]] || { echo "bench torch-backend: $bin not built" >&2; exit 2; }
export OMP_NUM_THREADS=1 USE_LIBUV=0

echo "torch $($python -c "import torch; print(torch.__version__)"), $(getconf _NPROCESSORS_ONLN) CPUs, $(date -u "+%Y-%m-%d %H:%M UTC")"
torch_out=$(gloo_pair PYTHONPATH="$pydir" -- "$python" bench/python/torch_allreduce.py --sizes 4,44,200 --reps "$reps")
printf '\nall-reduce of float32, 2 ranks, ms: median (min-max) of %s\n' "$reps"
printf '%-6s %-22s %-22s %-22s %-11s %s\n' MB "nano backend" "gloo backend" "nano C++ communicator" "nano/gloo" "nano/C++"
for mb in 4 44 200; do
  cxx_out=$(gloo_pair -- "$bin" "$mb" "$reps")
  read -r nano nano_min nano_max < <(awk -v mb="$mb" '$1=="RESULT" && $2=="torch-nano" && $3==mb {print $4, $5, $6}' <<<"$torch_out")
  read -r gloo gloo_min gloo_max < <(awk -v mb="$mb" '$1=="RESULT" && $2=="torch-gloo" && $3==mb {print $4, $5, $6}' <<<"$torch_out")
  read -r cxx cxx_min < <(awk '$1=="RESULT" && $2=="gloo" {print $3, $4}' <<<"$cxx_out" | head -1)
  printf '%-6s %-22s %-22s %-22s %-11s %s\n' "$mb" "$nano ($nano_min-$nano_max)" "$gloo ($gloo_min-$gloo_max)" \
    "$cxx (min $cxx_min)" "$(awk -v a="$nano" -v b="$gloo" 'BEGIN{printf "%.2f", a/b}')" \
    "$(awk -v a="$nano" -v b="$cxx" 'BEGIN{printf "%.2f", a/b}')"
done

# Training: interleaved, model by model, gloo then nano, REPEATS times.
declare -A rates
for ((i = 0; i < repeats; i++)); do
  for model in lenet resnet18; do
    steps=$lenet_steps
    [[ $model == resnet18 ]] && steps=$resnet_steps
    for backend in gloo nano; do
      line=$(PYTHONPATH="$pydir" "$build/bin/nano-run" -n 2 --backend subprocess --output-ranks 0 \
               "$python" bench/python/pytorch_ddp.py "$model" --steps "$steps" --dist-backend "$backend" |
             sed -n 's/.*nano-result: //p')
      rate=$($python -c 'import json, sys; print("%.1f" % json.loads(sys.argv[1])["images_per_sec"])' "$line")
      rates[$model.$backend]+="$rate "
    done
  done
done
stats() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{v[NR]=$1} END{printf "%s %s %s\n", v[int((NR+1)/2)], v[1], v[NR]}'; }
printf '\nstock DDP under nano-run -n 2, img/s: median (min-max) of %s\n' "$repeats"
printf '%-9s %-24s %-24s %s\n' model "gloo" "nano" "nano/gloo (median)"
for model in lenet resnet18; do
  read -r g g_min g_max < <(stats "${rates[$model.gloo]}")
  read -r n n_min n_max < <(stats "${rates[$model.nano]}")
  printf '%-9s %-24s %-24s %s\n' "$model" "$g ($g_min-$g_max)" "$n ($n_min-$n_max)" \
    "$(awk -v a="$n" -v b="$g" 'BEGIN{printf "%.3f", a/b}')"
done
