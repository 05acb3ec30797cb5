#include "launcher/prepare/torchrun_env.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include <nano/error.h>
#include "core/job_secret.h"
#include "core/rank_contract.h"
#include "launcher/prepare/job_files.h"

namespace nano {

std::string rank_files_dir(const AttemptIdentity& attempt, int rank) {
  if (!attempt.job_dir.empty()) return attempt.job_dir + "/rank-" + std::to_string(rank);
  return "/dev/shm/" + job_shm_prefix(attempt.job_id) + "rank-" + std::to_string(rank);
}

std::string error_file_path(const AttemptIdentity& attempt, int rank) {
  return rank_files_dir(attempt, rank) + "/error.json";
}

Environment attempt_variables(const AttemptIdentity& attempt, int rank) {
  if (attempt.job_id.empty()) return {};
  Environment env;
  env[contract::kJobId] = attempt.job_id;
  env[contract::kRestartCount] = std::to_string(attempt.restart_count);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(attempt.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = attempt.run_id;
  env["TORCHELASTIC_ERROR_FILE"] = error_file_path(attempt, rank);
  if (!attempt.secret.empty()) env[kJobSecretVariable] = attempt.secret;
  return env;
}

DroppedVariables drop_agent_variables(Environment& env) {
  DroppedVariables out;
  std::string listed;
  const auto drop = [&](const char* name) {
    auto it = env.find(name);
    if (it == env.end()) return;
    out.names.push_back(name);
    listed += (listed.empty() ? "" : ", ") + it->first + "=" + it->second;
    env.erase(it);
  };
  drop("TORCHELASTIC_USE_AGENT_STORE");
  auto timer = env.find("TORCHELASTIC_ENABLE_FILE_TIMER");
  const bool agent_timer = timer != env.end() && timer->second == "1";
  drop("TORCHELASTIC_ENABLE_FILE_TIMER");
  if (agent_timer) drop("TORCHELASTIC_TIMER_FILE");
  if (!listed.empty())
    out.warning = "not passing " + listed +
                  " to the ranks: nano-run runs no torchelastic agent, so nothing would serve what it "
                  "points at (its store, its watchdog)";
  return out;
}

namespace {

// The innermost frame of a Python traceback: its last `  File "PATH", line N, in NAME` line
// (with chained exceptions, the last traceback printed is the one raised).
std::string innermost_frame(const std::string& traceback) {
  const std::string head = "  File \"";
  std::string where;
  size_t at = 0;
  while ((at = traceback.find(head, at)) != std::string::npos) {
    const size_t end = traceback.find('\n', at);
    const std::string line = traceback.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at += head.size();
    const size_t quote = line.find("\", line ", head.size());
    const size_t in = line.find(", in ", quote == std::string::npos ? 0 : quote);
    if (quote == std::string::npos || in == std::string::npos) continue;
    const std::string file = line.substr(head.size(), quote - head.size());
    const std::string number = line.substr(quote + 8, in - quote - 8);
    where = file + ":" + number + " in " + line.substr(in + 5);
  }
  return where;
}

}  // namespace

std::optional<RaisedError> parse_error_file(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("message")) return std::nullopt;
  const nlohmann::json& message = j["message"];
  RaisedError out;
  if (message.is_string()) {
    out.message = message.get<std::string>();
  } else if (message.is_object() && message.contains("message") && message["message"].is_string()) {
    out.message = message["message"].get<std::string>();
    if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
      const nlohmann::json& extra = message["extraInfo"];
      if (extra.contains("py_callstack") && extra["py_callstack"].is_string())
        out.where = innermost_frame(extra["py_callstack"].get<std::string>());
    }
  } else {
    return std::nullopt;
  }
  return out;
}

std::optional<std::string> read_error_file(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(limit, '\0');
  in.read(text.data(), static_cast<std::streamsize>(limit));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.empty()) return std::nullopt;
  return text;
}

void make_rank_files_dir(const AttemptIdentity& attempt, int rank) {
  make_private_folder(rank_files_dir(attempt, rank));
}

}  // namespace nano
