#include "launcher/launch/host_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include "launcher/process/subprocess.h"
#include "launcher/process/timeouts.h"

namespace nano {

std::vector<std::string> launch_agent(const Environment& env) {
  std::string agent = "ssh";
  for (const char* name : {"PRTE_MCA_plm_ssh_agent", "OMPI_MCA_plm_rsh_agent"}) {
    const auto it = env.find(name);
    if (it != env.end() && !it->second.empty()) {
      agent = it->second;
      break;
    }
  }
  agent = agent.substr(0, agent.find(':'));  // Open MPI tries a list's agents in turn: the first
  // The arguments Open MPI adds to the agent (a port, a key) are the probe's too.
  for (const char* name : {"PRTE_MCA_plm_ssh_args", "OMPI_MCA_plm_rsh_args"}) {
    const auto it = env.find(name);
    if (it != env.end() && !it->second.empty()) {
      agent += " " + it->second;
      break;
    }
  }
  std::vector<std::string> words;
  std::istringstream in(agent);
  for (std::string word; in >> word;) words.push_back(word);
  if (words.empty()) words.push_back("ssh");
  return words;
}

std::vector<std::string> probe_command(ProbeWay way, const std::vector<std::string>& agent, const std::string& host,
                                       std::chrono::seconds within) {
  if (way == ProbeWay::kSlurm) return {"sinfo", "--noheader", "--Node", "--nodes=" + host, "--format=%T"};
  std::vector<std::string> command = agent;
  const std::string program = agent.front().substr(agent.front().rfind('/') + 1);
  if (program == "ssh") {
    // Never a password prompt; the connection itself bounded (the whole probe is bounded too).
    for (const std::string& option : {std::string("BatchMode=yes"), "ConnectTimeout=" + std::to_string(within.count())})
      command.insert(command.end(), {"-o", option});
  }
  command.insert(command.end(), {host, "true"});
  return command;
}

bool slurm_state_answers(const std::string& state) {
  if (state.empty() || state.back() == '*') return false;  // "*": the node does not respond
  for (const char* gone : {"down", "drain", "fail", "power", "unknown", "no_respond", "not_responding", "future"})
    if (state.find(gone) != std::string::npos) return false;
  return true;
}

namespace {

// One probe under way: its process and, for sinfo, the pipe its answer comes on.
struct Asking {
  std::string host;
  Spawned process;
  bool done = false;
  bool answered = false;
  std::string output;
};

void read_some(Asking& a) {
  char buf[256];
  for (;;) {
    const ssize_t n = read(a.process.stdout_fd, buf, sizeof buf);
    if (n <= 0) return;
    a.output.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

std::set<std::string> hosts_not_answering(ProbeWay way, const std::vector<std::string>& hosts, const Environment& env,
                                          std::chrono::seconds within) {
  std::set<std::string> silent;
  const std::vector<std::string> agent = launch_agent(env);
  std::string path = "/usr/bin:/bin";
  if (const auto it = env.find("PATH"); it != env.end()) path = it->second;
  std::vector<std::string> env_list;
  for (const auto& [name, value] : env) env_list.push_back(name + "=" + value);
  std::vector<Asking> asking;
  for (const std::string& host : hosts) {
    std::vector<std::string> command = probe_command(way, agent, host, within);
    try {
      command[0] = resolve_program(command[0], path);
      SpawnRequest request;
      request.argv = command;
      request.env = env_list;
      Asking a;
      a.host = host;
      a.process = spawn_process(request);
      fcntl(a.process.stdout_fd, F_SETFL, fcntl(a.process.stdout_fd, F_GETFL) | O_NONBLOCK);
      asking.push_back(std::move(a));
    } catch (const std::exception&) {
      silent.insert(host);  // no agent to ask with: no answer
    }
  }
  const auto until = std::chrono::steady_clock::now() + within;
  for (;;) {
    bool waiting = false;
    for (Asking& a : asking) {
      if (a.done) continue;
      read_some(a);
      int status = 0;
      if (waitpid(a.process.pid, &status, WNOHANG) == a.process.pid) {
        read_some(a);
        a.done = true;
        a.answered = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (a.answered && way == ProbeWay::kSlurm) {
          std::string state = a.output.substr(0, a.output.find('\n'));
          state.erase(std::remove(state.begin(), state.end(), ' '), state.end());
          a.answered = slurm_state_answers(state);
        }
      } else {
        waiting = true;
      }
    }
    if (!waiting || std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(kFinalDrainPollInterval);
  }
  for (Asking& a : asking) {
    if (!a.done) {
      a.process.group.signal(SIGKILL);
      // Reaped within a bound: a probe stuck where SIGKILL cannot reach it yet (an unreachable
      // network file system) must not hold the launch; it is reaped with nano-run then.
      for (int i = 0; i < 20 && waitpid(a.process.pid, nullptr, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(kFinalDrainPollInterval);
    }
    if (a.process.stdout_fd >= 0) close(a.process.stdout_fd);
    if (a.process.stderr_fd >= 0) close(a.process.stderr_fd);
    if (!a.answered) silent.insert(a.host);
  }
  return silent;
}

}  // namespace nano
