#include "launcher/process/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nano/error.h>
#include "core/cpulist.h"

namespace nano {
namespace {

// What the child reports back over the CLOEXEC status pipe; EOF means exec succeeded.
enum Stage : int { kSetup = 0, kAffinity = 1, kMempolicy = 2, kExec = 3 };
struct ChildReport {
  int stage;
  int err;
};

constexpr int kMaxNumaWords = 16;  // node ids below 1024
constexpr int kMpolBind = 2;

void report(int fd, int stage, int err) {
  ChildReport r{stage, err};
  ssize_t ignored = write(fd, &r, sizeof r);
  (void)ignored;
}

std::string errno_text(int err) { return strerror(err); }

}  // namespace

void decode_wait_status(int status, int& exit_code, int& signal) {
  exit_code = 0;
  signal = 0;
  if (WIFEXITED(status))
    exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    signal = WTERMSIG(status);
}

std::string resolve_program(const std::string& name, const std::string& path_env) {
  auto check = [](const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
  };
  if (name.empty()) throw UsageError("program not found: ''");
  if (name.find('/') != std::string::npos) {
    struct stat st;
    if (stat(name.c_str(), &st) != 0) throw UsageError("program not found: " + name);
    if (!check(name)) throw UsageError("program is not executable: " + name);
    return name;
  }
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    std::string dir = path_env.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (check(candidate)) return candidate;
    start = end + 1;
  }
  throw UsageError("program not found: " + name);
}

void check_runnable(const std::string& path, const std::string& path_env) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char head[512];
  ssize_t n = read(fd, head, sizeof head);
  close(fd);
  if (n < 0) return;
  const std::string text(head, static_cast<size_t>(n));
  if (text.compare(0, 4,
                   "\x7f"
                   "ELF") == 0)
    return;
  if (text.compare(0, 2, "#!") != 0) throw UsageError("cannot run " + path + ": it has no #! line and is not a binary");
  // "#! /interp [arg]": the interpreter, then (for env) the program it looks up.
  std::vector<std::string> words;
  std::string word;
  for (size_t i = 2; i < text.size() && text[i] != '\n'; ++i) {
    if (text[i] == ' ' || text[i] == '\t') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += text[i];
    }
  }
  if (!word.empty()) words.push_back(word);
  if (words.empty()) throw UsageError("cannot run " + path + ": its #! line names no interpreter");
  struct stat st;
  if (stat(words[0].c_str(), &st) != 0)
    throw UsageError("cannot run " + path + ": its interpreter " + words[0] + " is not installed");
  if (!S_ISREG(st.st_mode) || access(words[0].c_str(), X_OK) != 0)
    throw UsageError("cannot run " + path + ": its interpreter " + words[0] + " is not executable");
  const std::string base = words[0].substr(words[0].rfind('/') + 1);
  if (base == "env" && words.size() > 1 && words[1][0] != '-') {
    try {
      resolve_program(words[1], path_env);
    } catch (const UsageError&) {
      throw UsageError("cannot run " + path + ": its interpreter " + words[1] + " (through " + words[0] +
                       ") is not on PATH");
    }
  }
}

Spawned spawn_process(const SpawnRequest& request) {
  if (request.argv.empty()) throw Error("spawn_process: empty argv");
  // Everything the child touches is prepared here: after fork only async-signal-safe calls.
  std::vector<char*> argv, envp;
  for (const auto& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : request.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : request.cpus) {
    if (c < 0 || c >= CPU_SETSIZE) throw Error("cannot bind to CPU " + std::to_string(c));
    CPU_SET(c, &cpus);
  }
  unsigned long nodemask[kMaxNumaWords] = {};
  for (int n : request.numa_nodes) {
    if (n < 0 || n >= kMaxNumaWords * 64) throw Error("cannot bind to NUMA node " + std::to_string(n));
    nodemask[n / 64] |= 1UL << (n % 64);
  }

  int status_pipe[2], out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (pipe2(status_pipe, O_CLOEXEC) != 0) throw Error("pipe: " + errno_text(errno));
  if (request.capture_output && (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0))
    throw Error("pipe: " + errno_text(errno));
  int devnull = request.null_stdin ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw Error("fork: " + errno_text(errno));
  if (pid == 0) {
    int st = status_pipe[1];
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT, SIGUSR1, SIGUSR2}) signal(sig, SIG_DFL);
    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    if (devnull >= 0 && dup2(devnull, 0) < 0) {
      report(st, kSetup, errno);
      _exit(127);
    }
    if (request.capture_output && (dup2(out_pipe[1], 1) < 0 || dup2(err_pipe[1], 2) < 0)) {
      report(st, kSetup, errno);
      _exit(127);
    }
    if (!request.cpus.empty() && sched_setaffinity(0, sizeof cpus, &cpus) != 0) {
      report(st, kAffinity, errno);
      _exit(127);
    }
    if (!request.numa_nodes.empty() && syscall(SYS_set_mempolicy, kMpolBind, nodemask, kMaxNumaWords * 64 + 1) != 0) {
      report(st, kMempolicy, errno);  // not fatal: the rank runs with the default policy
    }
    execve(argv[0], argv.data(), envp.data());
    report(st, kExec, errno);
    _exit(127);
  }
  // Also set the group from the parent so a signal sent right after spawn reaches it.
  setpgid(pid, pid);
  close(status_pipe[1]);
  if (devnull >= 0) close(devnull);
  Spawned spawned;
  spawned.pid = pid;
  spawned.group = OwnGroup::of_child(pid);  // not reaped yet: the pid is surely the child's
  if (request.capture_output) {
    close(out_pipe[1]);
    close(err_pipe[1]);
    spawned.stdout_fd = out_pipe[0];
    spawned.stderr_fd = err_pipe[0];
  }
  std::string failure;
  ChildReport r;
  for (;;) {
    ssize_t n = read(status_pipe[0], &r, sizeof r);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof r)) break;
    if (r.stage == kMempolicy) {
      spawned.warnings.push_back("cannot bind memory to NUMA node(s) " + format_cpu_list(request.numa_nodes) +
                                 " (set_mempolicy: " + errno_text(r.err) + "); ranks use the default memory policy");
    } else if (r.stage == kAffinity) {
      failure =
          "cannot bind " + request.argv[0] + " to CPUs " + format_cpu_list(request.cpus) + ": " + errno_text(r.err);
    } else if (r.stage == kExec) {
      failure = "cannot run " + request.argv[0] + ": " + errno_text(r.err);
    } else {
      failure = "cannot set up " + request.argv[0] + ": " + errno_text(r.err);
    }
  }
  close(status_pipe[0]);
  if (!failure.empty()) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (spawned.stdout_fd >= 0) close(spawned.stdout_fd);
    if (spawned.stderr_fd >= 0) close(spawned.stderr_fd);
    throw Error(failure);
  }
  return spawned;
}

}  // namespace nano
