// All-reduce of one large buffer through nano's communicator, plus a memcpy of the same bytes for
// scale. Launch it under mpirun (MPI path) or with the rank contract (Gloo path); rank 0 prints
// "RESULT <path> <median ms> <min ms>" lines for scripts/bench.sh allreduce. Every rank checks
// the sums it got and exits 1, saying so, when they are wrong.
// Usage: nano_bench_allreduce [MB of float32 elements] [REPS] [float32|bfloat16]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
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

// The whole of `text` as a finite number above 0, or nothing.
std::optional<double> positive_number(const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(value) || value <= 0) return std::nullopt;
  return value;
}

// The one-line error every bad input gets (exit 2).
int bad_argument(const char* what, const char* given, const char* expected) {
  std::fprintf(stderr, "nano_bench_allreduce: bad %s '%s': expected %s\n", what, given, expected);
  return 2;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<double> mb_given = argc > 1 ? positive_number(argv[1]) : 44.0;
  if (!mb_given || *mb_given > 1e5) return bad_argument("MB", argv[1], "a positive number up to 100000");
  const std::optional<double> reps_given = argc > 2 ? positive_number(argv[2]) : 15.0;
  if (!reps_given || *reps_given != std::floor(*reps_given) || *reps_given > 1e6)
    return bad_argument("REPS", argv[2], "a whole number from 1 to 1000000");
  const std::string dtype = argc > 3 ? argv[3] : "float32";
  if (dtype != "float32" && dtype != "bfloat16") return bad_argument("dtype", dtype.c_str(), "float32 or bfloat16");
  if (argc > 4) return bad_argument("argument", argv[4], "at most MB, REPS and a dtype");
  const double mb = *mb_given;
  const int reps = static_cast<int>(*reps_given);
  try {
    nano::World world = nano::init();
    const int64_t n = static_cast<int64_t>(mb * 1e6 / 4);
    // Values that differ along the buffer, so a slice put in the wrong place shows.
    const at::Tensor pattern = (at::arange(n, at::kLong) % 7).to(at::kFloat);
    at::Tensor t = (pattern + world.rank()).to(dtype == "bfloat16" ? at::kBFloat16 : at::kFloat);
    std::vector<double> times;
    for (int i = 0; i < reps + 2; ++i) {
      world.comm->barrier();
      const double t0 = now_ms();
      world.comm->all_reduce(t, nano::ReduceOp::kSum);
      const double t1 = now_ms();
      if (i >= 2) times.push_back(t1 - t0);
    }
    // After the first sum, pattern * W + W(W-1)/2; every later sum multiplies by W.
    const double w = world.size();
    const at::Tensor want = (pattern * w + w * (w - 1) / 2) * std::pow(w, reps + 1);
    if (!at::allclose(t.to(at::kFloat), want, dtype == "bfloat16" ? 1e-2 : 1e-5, 0)) {
      std::fprintf(stderr, "nano_bench_allreduce: rank %d: wrong sums (element 0: %g, expected %g)\n", world.rank(),
                   t[0].item<double>(), want[0].item<double>());
      return 1;
    }
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
