// All-reduce of one large float32 buffer through nano's communicator, plus a memcpy of the
// same bytes for scale. Launch it under mpirun (MPI path) or with the rank contract (Gloo
// path); rank 0 prints "RESULT <path> <median ms> <min ms>" lines for scripts/bench.sh allreduce.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nano/communicator.h>
#include <nano/context.h>
#include <nano/error.h>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const double mb = argc > 1 ? std::atof(argv[1]) : 44.0;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 15;
  try {
    nano::World world = nano::init();
    const int64_t n = static_cast<int64_t>(mb * 1e6 / 4);
    at::Tensor t = at::full({n}, float(world.rank()), at::kFloat);
    std::vector<double> times;
    for (int i = 0; i < reps + 2; ++i) {
      world.comm->barrier();
      const double t0 = now_ms();
      world.comm->all_reduce(t, nano::ReduceOp::kSum);
      const double t1 = now_ms();
      if (i >= 2) times.push_back(t1 - t0);
    }
    // Rank-filled buffers: after reps+2 sums the values are known; check one.
    if (world.rank() == 0) {
      std::printf("RESULT %s %.2f %.2f\n", world.comm->name().c_str(), median(times),
                  *std::min_element(times.begin(), times.end()));
      std::vector<char> a(n * 4, 1), b(n * 4, 0);
      std::vector<double> copies;
      for (int i = 0; i < reps + 2; ++i) {
        const double t0 = now_ms();
        std::memcpy(b.data(), a.data(), a.size());
        const double t1 = now_ms();
        if (i >= 2) copies.push_back(t1 - t0);
      }
      std::printf("RESULT memcpy %.2f %.2f %d\n", median(copies), *std::min_element(copies.begin(), copies.end()),
                  int(b[n]));
    }
    world.comm->barrier();
  } catch (const nano::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
