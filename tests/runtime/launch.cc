#include "tests/runtime/launch.h"

#include "launcher/prepare/port.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace nano::test {

namespace {

std::string slurp_and_remove(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  return text.str();
}

struct Child {
  pid_t pid = -1;
  std::string out_path, err_path;
};

Child spawn(const std::vector<std::string>& argv, const Environment& env) {
  static int counter = 0;
  Child c;
  const std::string base = "/tmp/nano-rt-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  c.out_path = base + ".out";
  c.err_path = base + ".err";
  // Build everything before fork: only async-signal-safe calls in the child.
  std::vector<std::string> env_strings;
  for (char** p = environ; *p; ++p) {
    std::string entry(*p);
    const std::string key = entry.substr(0, entry.find('='));
    // A launch of our own must not look like an mpirun rank to the child.
    if (env.count(key) || key.rfind("OMPI_COMM_WORLD", 0) == 0 || key.rfind("PMIX_", 0) == 0) continue;
    env_strings.push_back(entry);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  int out = open(c.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int err = open(c.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  c.pid = fork();
  if (c.pid == 0) {
    setpgid(0, 0);
    dup2(out, 1);
    dup2(err, 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  setpgid(c.pid, c.pid);
  close(out);
  close(err);
  return c;
}

std::vector<RankResult> wait_all(std::vector<Child>& children, int timeout_s) {
  std::vector<RankResult> results(children.size());
  std::vector<bool> done(children.size(), false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  size_t remaining = children.size();
  bool killed = false;
  while (remaining > 0) {
    for (size_t i = 0; i < children.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (waitpid(children[i].pid, &status, WNOHANG) == children[i].pid) {
        done[i] = true;
        --remaining;
        results[i].exit_code = killed ? 124 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    if (remaining == 0) break;
    if (!killed && std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < children.size(); ++i) {
        if (!done[i]) kill(-children[i].pid, SIGKILL);
      }
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (size_t i = 0; i < children.size(); ++i) {
    results[i].pid = children[i].pid;
    results[i].out = slurp_and_remove(children[i].out_path);
    results[i].err = slurp_and_remove(children[i].err_path);
  }
  return results;
}

}  // namespace

std::vector<RankResult> run_ranks(const std::vector<std::string>& argv, int world, const std::vector<int>& ranks,
                                  const Environment& extra, int port, int timeout_s) {
  if (port == 0) port = nano::pick_free_port();  // nano-run's own pick (launcher/prepare/port.h)
  std::vector<Child> children;
  for (int r : ranks) {
    Environment env = extra;
    env["RANK"] = std::to_string(r);
    env.emplace("LOCAL_RANK", std::to_string(r));  // `extra` may describe ranks on several hosts
    env["WORLD_SIZE"] = std::to_string(world);
    env.emplace("LOCAL_WORLD_SIZE", std::to_string(world));
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = std::to_string(port);
    env.emplace("OMP_NUM_THREADS", "1");
    children.push_back(spawn(argv, env));
  }
  return wait_all(children, timeout_s);
}

std::vector<RankResult> run_world(const std::vector<std::string>& argv, int world, const Environment& extra,
                                  int timeout_s) {
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(r);
  return run_ranks(argv, world, ranks, extra, 0, timeout_s);
}

RankResult run_mpirun(const std::vector<std::string>& argv, int world, const Environment& extra, int timeout_s) {
  Environment env = extra;
  env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
  env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  env.emplace("OMP_NUM_THREADS", "1");
  std::vector<std::string> cmd = {NANO_TEST_MPIRUN,  "-np",       std::to_string(world),
                                  "--oversubscribe", "--bind-to", "none"};
  // Forward the variables explicitly: Open MPI's local launch copies the environment, but -x
  // keeps this correct for remote launches too.
  for (const auto& [k, v] : extra) {
    cmd.push_back("-x");
    cmd.push_back(k);
  }
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  std::vector<Child> children{spawn(cmd, env)};
  return wait_all(children, timeout_s)[0];
}

RankResult run_command(const std::vector<std::string>& argv, const Environment& extra, int timeout_s) {
  Environment env = extra;
  env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
  env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  std::vector<Child> children{spawn(argv, env)};
  return wait_all(children, timeout_s)[0];
}

}  // namespace nano::test
