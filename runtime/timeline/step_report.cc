#include "runtime/timeline/step_report.h"
#include "core/rank_contract.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace nano {
namespace {

// One rank's report file and the step in progress. Steps come from DDP once it reported one;
// before that (and in a world of one, always) from the loader's batches.
struct Report {
  std::mutex mutex;
  int fd = -1;
  int collectives_fd = -1;  // opened at the first all-reduce
  bool ddp_seen = false;
  bool loader_samples = false;  // the loader tells the samples: DDP's forward then does not
  bool batch_pending = false;   // a loader batch is in progress (its step ends at the next one)
  long long samples = 0;
};

// FOLDER/rank-R.EXTENSION, opened for appending; -1 when it cannot be (a trial without its
// figures is reported as such by nano-run).
int open_file(const char* extension) {
  const char* folder = std::getenv(contract::kTuneReport);
  const char* rank = std::getenv("RANK");
  const std::string path = std::string(folder) + "/rank-" + (rank && *rank ? rank : "0") + "." + extension;
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
}

Report* open_report() {
  const char* folder = std::getenv(contract::kTuneReport);
  if (!folder || !*folder) return nullptr;
  return new Report;  // lives as long as the process: steps may end during its exit
}

void write_line(int fd, long long value) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  char line[64];
  const int n = std::snprintf(line, sizeof line, "%lld.%09ld %lld\n", static_cast<long long>(now.tv_sec),
                              static_cast<long>(now.tv_nsec), value);
  if (n > 0 && fd >= 0) (void)!::write(fd, line, static_cast<std::size_t>(n));
}

Report* report() {
  static Report* const instance = open_report();
  return instance;
}

void write_step(Report& r) {
  if (r.fd < 0) r.fd = open_file("steps");
  write_line(r.fd, r.samples);
  r.samples = 0;
}

}  // namespace

bool in_tuning_trial() {
  const char* trial = std::getenv(contract::kTuneTrial);
  return trial && std::strcmp(trial, "1") == 0;
}

namespace step_report {

void ddp_step() {
  Report* r = report();
  if (!r) return;
  std::lock_guard<std::mutex> lock(r->mutex);
  r->ddp_seen = true;
  write_step(*r);
}

void forward_samples(long long samples) {
  Report* r = report();
  if (!r || samples <= 0) return;
  std::lock_guard<std::mutex> lock(r->mutex);
  if (!r->loader_samples) r->samples += samples;
}

void loader_batch(std::size_t samples) {
  Report* r = report();
  if (!r) return;
  std::lock_guard<std::mutex> lock(r->mutex);
  if (!r->loader_samples) {
    r->loader_samples = true;
    r->samples = 0;  // what DDP's forward counted before is the loader's to count
  }
  if (!r->ddp_seen && r->batch_pending) write_step(*r);
  r->batch_pending = true;
  r->samples += static_cast<long long>(samples);
}

void all_reduce(std::size_t bytes) {
  Report* r = report();
  if (!r) return;
  std::lock_guard<std::mutex> lock(r->mutex);
  if (r->collectives_fd < 0) r->collectives_fd = open_file("collectives");
  write_line(r->collectives_fd, static_cast<long long>(bytes));
}

}  // namespace step_report
}  // namespace nano
