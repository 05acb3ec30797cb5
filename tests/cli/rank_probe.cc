// A rank for the launcher's integration tests: prints one JSON line with its rank
// environment, its affinity mask, its OpenMP/allocator settings and what its NANO_JOB_DIR is
// (job_dir: "0700 <uid>" for a folder of that mode and owner, "" when none), then does what its flags
// say. Every action takes "VALUE[@RANKS]" (RANKS "1" or "0,2"; no @ = every rank):
//   --exit K[@R]        exit with code K
//   --segv [@R]         raise SIGSEGV
//   --sleep S[@R]       sleep S seconds (after printing)
//   --ignore-term [@R]  ignore SIGTERM
//   --pid-dir DIR       write DIR/rank-N.pid (written before anything else is done)
//   --stderr TEXT[@R]   write TEXT as a line on stderr
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

int my_rank() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : -1;
}

// Splits "VALUE@RANKS"; true when this rank is selected.
bool selected(const std::string& arg, std::string& value) {
  auto at = arg.find('@');
  value = arg.substr(0, at);
  if (at == std::string::npos) return true;
  std::stringstream ranks(arg.substr(at + 1));
  std::string r;
  while (std::getline(ranks, r, ','))
    if (!r.empty() && std::atoi(r.c_str()) == my_rank()) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto flag = [&](const std::string& name, std::string& value) {
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == name && selected(args[i + 1], value)) return true;
    return false;
  };
  std::string v;
  if (flag("--pid-dir", v)) {
    std::ofstream(v + "/rank-" + std::to_string(my_rank()) + ".pid") << getpid() << "\n";
  }
  nlohmann::json j;
  j["pid"] = getpid();
  j["rank"] = my_rank();
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  j["affinity"] = cpus;
  nlohmann::json env = nlohmann::json::object();
  for (const char* name :
       {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "NANO_CPUS",
        "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY", "KMP_BLOCKTIME", "LD_PRELOAD", "MALLOC_CONF",
        "NANO_TEST_EXTRA", "NANO_JOB_ID", "NANO_JOB_DIR", "NANO_LAUNCH_HOST"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  j["env"] = env;
  std::string job_dir;
  struct stat st {};
  if (const char* dir = std::getenv("NANO_JOB_DIR"); dir && lstat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    job_dir = std::string(mode) + " " + std::to_string(st.st_uid);
  }
  j["job_dir"] = job_dir;
  std::cout << j.dump() << std::endl;
  if (flag("--stderr", v)) std::cerr << v << std::endl;
  if (flag("--ignore-term", v)) signal(SIGTERM, SIG_IGN);
  if (flag("--sleep", v)) std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(v.c_str())));
  if (flag("--segv", v)) raise(SIGSEGV);
  if (flag("--exit", v)) return std::atoi(v.c_str());
  return 0;
}
