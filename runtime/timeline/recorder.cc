#include "runtime/timeline/recorder.h"

#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpulist.h"
#include "core/rank_contract.h"

namespace nano::timeline {
namespace {

int64_t clock_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

std::string variable(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// The NUMA nodes `cpus` lie on, from sysfs ("-" where it tells none).
std::string numa_nodes_of(const std::vector<int>& cpus) {
  std::vector<int> nodes;
  DIR* dir = opendir("/sys/devices/system/node");
  if (!dir) return "-";
  while (dirent* e = readdir(dir)) {
    int node = -1;
    if (std::sscanf(e->d_name, "node%d", &node) != 1) continue;
    std::ifstream in(std::string("/sys/devices/system/node/") + e->d_name + "/cpulist");
    std::string text;
    if (!std::getline(in, text)) continue;
    try {
      for (int c : parse_cpu_list(text))
        if (std::find(cpus.begin(), cpus.end(), c) != cpus.end()) {
          nodes.push_back(node);
          break;
        }
    } catch (const std::exception&) {
    }
  }
  closedir(dir);
  return nodes.empty() ? "-" : format_cpu_list(nodes);
}

// Each thread's CPU time (clock ticks) and the CPU it last ran on, from /proc/self/task.
struct ThreadLook {
  long long ticks = 0;
  int cpu = -1;
};
std::map<long, ThreadLook> look_at_threads() {
  std::map<long, ThreadLook> threads;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return threads;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string text;
    if (!std::getline(in, text)) continue;
    // After the command's closing parenthesis: field 3 (state) onwards; utime and stime are
    // fields 14 and 15, the last CPU field 39.
    std::istringstream rest(text.substr(text.rfind(')') + 1));
    std::vector<std::string> fields;
    for (std::string f; rest >> f;) fields.push_back(f);
    if (fields.size() < 37) continue;
    ThreadLook look;
    look.ticks = std::atoll(fields[11].c_str()) + std::atoll(fields[12].c_str());
    look.cpu = std::atoi(fields[36].c_str());
    threads[std::atol(e->d_name)] = look;
  }
  closedir(dir);
  return threads;
}

struct Totals {
  int64_t data = 0, compute = 0, exchange = 0, checkpoint = 0, collectives = 0;
  void add(const Totals& o) {
    data += o.data;
    compute += o.compute;
    exchange += o.exchange;
    checkpoint += o.checkpoint;
    collectives += o.collectives;
  }
};

// The placement is looked at twice, a few steps in (the thread pools are up) and some steps
// later; the threads that used CPU time between the two looks are the ones that compute.
constexpr int64_t kFirstLook = 5;
constexpr int64_t kSecondLook = 25;
// A program without nano's steps (a stock PyTorch program on the nano backend) records this many
// collectives in detail, written in blocks of kCollectiveBlock bytes.
constexpr int64_t kDetailedCollectives = 20000;
constexpr std::size_t kCollectiveBlock = 16384;

struct Recorder {
  std::mutex mutex;
  int fd = -1;
  std::vector<int> cpus;
  int64_t steps = 0;           // steps ended
  int64_t step_start = -1;     // -1: at the step's first event
  int64_t fetch_start = -1;    // a batch being fetched
  int64_t compute_start = -1;  // the last batch of this step was handed out then
  int64_t exchange_start = -1;
  int64_t last_issued = -1;      // the step's last collective issued
  int64_t last_collective = -1;  // the step's last collective recorded ended then
  bool forward_seen = false;     // in this step
  bool ddp_seen = false;         // DDP ends the steps; before it does, the loader's batches do
  bool batch_seen = false;
  int64_t checkpoint_in_fetch = 0;
  Totals step;
  std::string lines;  // the step's detailed records
  Totals interval;
  int64_t interval_first = 0, interval_steps = 0, interval_start = 0;
  std::map<long, ThreadLook> first_look;

  int64_t collectives = 0;  // recorded in detail

  bool detailed() const { return steps < kDetailedSteps && collectives < kDetailedCollectives; }
  void started(int64_t t) {
    if (step_start < 0) step_start = t;
  }
  void write(const std::string& text) {
    if (fd >= 0 && !text.empty()) (void)!::write(fd, text.data(), text.size());
  }
  void phase(const char* name, int64_t start, int64_t end) {
    if (detailed()) lines += std::string("P ") + name + " " + std::to_string(start) + " " + std::to_string(end) + "\n";
  }
  void flush_interval() {
    if (interval_steps == 0) return;
    std::ostringstream a;
    a << "A " << interval_first << " " << interval_steps << " " << interval_start << " " << step_start << " "
      << interval.data << " " << interval.compute << " " << interval.exchange << " " << interval.checkpoint << " "
      << interval.collectives << "\n";
    write(a.str());
    interval = Totals{};
    interval_steps = 0;
  }
  // The step's compute ended at `t`: it ran from its first forward (else its batch, else the
  // step's start).
  void end_compute(int64_t t) {
    const int64_t from = compute_start >= 0 ? compute_start : step_start;
    step.compute += t - from;
    phase("compute", from, t);
    compute_start = -1;
  }
  // The step in progress ended at `t`: its records written (or added to the interval).
  void end_step(int64_t t) {
    started(t);
    if (exchange_start >= 0) {
      step.exchange += t - exchange_start;
      phase("exchange", exchange_start, t);
    } else if (compute_start >= 0) {
      step.compute += t - compute_start;  // no exchange: compute runs to the step's end
      phase("compute", compute_start, t);
    }
    if (detailed()) {
      std::ostringstream s;
      s << "S " << steps << " " << step_start << " " << t << " " << step.data << " " << step.compute << " "
        << step.exchange << " " << step.checkpoint << "\n";
      lines += s.str();
      write(lines);
    } else {
      if (interval_steps == 0) {
        interval_first = steps;
        interval_start = step_start;
      }
      interval.add(step);
      ++interval_steps;
    }
    lines.clear();
    step = Totals{};
    ++steps;
    step_start = t;
    compute_start = -1;
    exchange_start = -1;
    last_issued = -1;
    last_collective = -1;
    forward_seen = false;
    if (interval_steps == kIntervalSteps) flush_interval();
    place();
  }
  void place() {
    if (steps == kFirstLook) first_look = look_at_threads();
    if (steps != kSecondLook) return;
    int computing = 0, outside = 0;
    std::set<int> used;
    for (const auto& [tid, now] : look_at_threads()) {
      const auto before = first_look.find(tid);
      if (before == first_look.end() || now.ticks <= before->second.ticks) continue;
      ++computing;
      used.insert(now.cpu);
      if (std::find(cpus.begin(), cpus.end(), now.cpu) == cpus.end()) ++outside;
    }
    write("T " + std::to_string(computing) + " " +
          (used.empty() ? std::string("-") : format_cpu_list({used.begin(), used.end()})) + " " +
          std::to_string(outside) + "\n");
  }
};

Recorder* recorder();

Recorder* open_recorder() {
  const char* folder = std::getenv(contract::kTimeline);
  if (!folder || !*folder) return nullptr;
  const std::string rank = variable("RANK", variable("OMPI_COMM_WORLD_RANK", "0").c_str());
  const std::string path = std::string(folder) + "/rank-" + rank + ".attempt-" + variable(contract::kRestartCount, "0");
  auto* r = new Recorder;  // lives as long as the process: steps may end during its exit
  r->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  r->cpus = allowed_cpus_of_this_process();
  char host[256] = "-";
  gethostname(host, sizeof host - 1);
  r->write("R " + rank + " " + host + " " + (r->cpus.empty() ? "-" : format_cpu_list(r->cpus)) + " " +
           numa_nodes_of(r->cpus) + " " + variable("OMP_NUM_THREADS", "-") + "\n");
  // At a normal exit: the records of a step not ended (a stock program's collectives) and the
  // steps of an interval not yet written.
  std::atexit([] { nano::timeline::flush(); });
  return r;
}

Recorder* recorder() {
  static Recorder* const instance = open_recorder();
  return instance;
}

// Runs `event(recorder, now)` under the recorder's lock; nothing when the timeline is off.
template <class Event>
void record(Event event) {
  Recorder* r = recorder();
  if (!r) return;
  const int64_t t = clock_ns();
  std::lock_guard<std::mutex> lock(r->mutex);
  event(*r, t);
}

}  // namespace

void flush() {
  Recorder* rec = recorder();
  if (!rec) return;
  std::lock_guard<std::mutex> lock(rec->mutex);
  rec->write(rec->lines);
  rec->lines.clear();
  rec->flush_interval();
}

bool on() { return recorder() != nullptr; }

int64_t now_ns() { return on() ? clock_ns() : 0; }

void data_begin() {
  record([](Recorder& r, int64_t t) {
    r.started(t);
    // Without DDP (a world of one) a step ends where the loader is asked for the next batch.
    if (!r.ddp_seen && r.batch_seen) r.end_step(t);
    r.fetch_start = t;
    r.checkpoint_in_fetch = 0;
  });
}

void data_end() {
  record([](Recorder& r, int64_t t) {
    if (r.fetch_start < 0) return;
    r.step.data += std::max<int64_t>(0, t - r.fetch_start - r.checkpoint_in_fetch);
    r.phase("data", r.fetch_start, t);
    r.fetch_start = -1;
    r.batch_seen = true;
    if (!r.forward_seen) r.compute_start = t;
  });
}

void forward_begin() {
  record([](Recorder& r, int64_t t) {
    r.started(t);
    if (r.forward_seen) return;
    r.forward_seen = true;
    r.compute_start = t;
  });
}

void exchange_begin() {
  record([](Recorder& r, int64_t t) {
    r.started(t);
    r.end_compute(t);
    r.exchange_start = t;
  });
}

void collective_issued() {
  // Not a step's start: a model's set-up issues collectives (DDP's first broadcast) long before
  // its first batch.
  record([](Recorder& r, int64_t t) { r.last_issued = t; });
}

bool exchange_waited(bool end_step) {
  bool waited = false;
  record([&](Recorder& r, int64_t t) {
    if (r.last_issued < 0) return;
    waited = true;
    r.started(r.last_issued);  // a stock program's first step: from its exchange on
    // Not before the step's compute started (a collective the program issued before its forward).
    const int64_t ready = std::max({r.last_issued, r.compute_start, r.step_start});
    const int64_t done = r.last_collective > ready ? std::min(r.last_collective, t) : t;
    r.end_compute(ready);
    r.step.exchange += done - ready;
    r.phase("exchange", ready, done);
    r.last_issued = -1;
    if (!end_step) return;
    r.ddp_seen = true;
    r.end_step(t);
  });
  return waited;
}

void optimizer_begin() {
  record([](Recorder& r, int64_t t) {
    r.started(t);
    r.end_compute(t);
  });
}

void step_end() {
  record([](Recorder& r, int64_t t) {
    r.ddp_seen = true;
    r.end_step(t);
  });
}

void checkpoint_since(int64_t start) {
  if (start == 0) return;  // the timeline was off when it started
  record([start](Recorder& r, int64_t t) {
    r.started(start);
    r.step.checkpoint += t - start;
    if (r.fetch_start >= 0) r.checkpoint_in_fetch += t - start;
    r.phase("checkpoint", start, t);
  });
}

void collective_since(int64_t start, std::size_t bytes, const std::string& description) {
  if (start == 0) return;
  record([&](Recorder& r, int64_t t) {
    ++r.step.collectives;
    r.last_collective = t;
    if (!r.detailed()) return;
    ++r.collectives;
    r.lines +=
        "C " + std::to_string(start) + " " + std::to_string(t) + " " + std::to_string(bytes) + " " + description + "\n";
    if (r.steps == 0 && r.lines.size() >= kCollectiveBlock) {
      r.write(r.lines);
      r.lines.clear();
    }
  });
}

}  // namespace nano::timeline
