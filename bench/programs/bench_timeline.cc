// The timeline recorder's own cost per step (scripts/bench.sh timeline): the calls a training
// step makes (a batch fetched, a forward, the exchange's wait with two all-reduces, the step's
// end) timed over many steps, in the detailed steps and in the aggregated ones after them; with
// the timeline off, the same calls' checks.
//   nano_bench_timeline on|off STEPS   prints "RESULT MODE detailed_ns aggregated_ns" per step
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/rank_contract.h"
#include "runtime/timeline/recorder.h"

namespace {

double ns_per_step(long steps) {
  namespace tl = nano::timeline;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < steps; ++i) {
    tl::data_begin();
    tl::data_end();
    tl::forward_begin();
    tl::exchange_begin();
    for (int c = 0; c < 2; ++c) tl::collective_since(tl::now_ns(), 4096, "all_reduce(float32[1024], SUM)");
    tl::step_end();
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
         static_cast<double>(steps);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: nano_bench_timeline on|off STEPS (on: NANO_TIMELINE names a folder)\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "off") unsetenv(nano::contract::kTimeline);
  const long steps = std::atol(argv[2]);
  const double detailed = ns_per_step(nano::timeline::kDetailedSteps);
  const double aggregated = ns_per_step(steps);
  std::printf("RESULT %s %.0f %.0f\n", mode.c_str(), detailed, aggregated);
  return 0;
}
