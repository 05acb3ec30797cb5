#include "runtime/rendezvous/rendezvous.h"

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <chrono>
#include <sstream>
#include <thread>

#include <nano/error.h>
#include "core/job_secret.h"
#include "core/rank_contract.h"
#include "runtime/rendezvous/job_store.h"
#include "runtime/rendezvous/job_store_server.h"

namespace nano {

namespace {

using Clock = std::chrono::steady_clock;

std::string format_seconds(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

}  // namespace

std::string first_line(const std::string& text) {
  auto nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

std::string rendezvous_timeout_message(const std::string& where, double seconds, const std::vector<int>& missing,
                                       int world_size) {
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i) list += (i ? "," : "") + std::to_string(missing[i]);
  return "nano: rendezvous at " + where + " timed out after " + format_seconds(seconds) +
         " s: " + std::to_string(missing.size()) + " of " + std::to_string(world_size) +
         " ranks did not join (missing: " + list + ")";
}

std::string file_store_path(const std::string& job_dir, const Context& context, const std::string& prefix) {
  if (job_dir.empty() || job_dir[0] != '/' || context.local_world_size < context.world_size) return "";
  std::string tag = prefix;
  std::replace(tag.begin(), tag.end(), '/', '-');
  return job_dir + "/store-" + tag;
}

void check_private_job_dir(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0)
    throw Error("nano: the job's folder " + dir + " (" + contract::kJobDir + "): " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw Error("nano: the job's folder " + dir + " is not this user's private folder (owner uid " +
                std::to_string(st.st_uid) + ", mode " + mode + "): refusing to meet there");
  }
}

namespace {

// The TCP store of rank 0, with the failures of hosting and reaching it told apart.
c10::intrusive_ptr<c10d::Store> tcp_store(const Context& context, const std::string& where) {
  const auto timeout = context.rendezvous_timeout;
  const double seconds = timeout.count() / 1000.0;
  const auto deadline = Clock::now() + timeout;
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(context.master_port);
  opts.isServer = context.rank == 0;
  opts.waitWorkers = false;  // we wait ourselves, to name the missing ranks
  opts.timeout = timeout;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  // libtorch 2.4 made the libuv store server the default; Debian 13's libtorch 2.6 is built
  // without libuv, and rank 0 then fails to host the store. The classic server serves a
  // rendezvous of any size nano runs. (libtorch 1.13 has no such option.)
  opts.useLibUV = false;
#endif
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(context.master_addr, opts);
  } catch (const std::exception& e) {
    if (context.rank == 0) {
      throw Error("nano: cannot host the rendezvous store on " + where + ": " + first_line(e.what()));
    }
    // libtorch 1.13's client retries until its own timeout (rounded down to seconds) and says
    // "timed out"; 2.x's can give up at once when nothing listens.
    const double waited = std::chrono::duration<double>(Clock::now() - (deadline - timeout)).count();
    if (waited >= seconds || std::string(e.what()).find("timed out") != std::string::npos) {
      throw Error("nano: rendezvous at " + where + " timed out after " + format_seconds(seconds) +
                  " s: the store host (rank 0) did not answer");
    }
    // Refused long before the timeout: rank 0 is not hosting the store (it failed to, or
    // failed before); its own line says why.
    throw Error("nano: rendezvous at " + where + " failed: rank 0 did not host the store (" + first_line(e.what()) +
                "); see rank 0's error");
  }
  return store;
}

// nano's job store (runtime/rendezvous/job_store.h): rank 0 hosts its server, every rank proves it knows
// the job's secret.
c10::intrusive_ptr<c10d::Store> job_store(const Context& context, const std::string& secret) {
  std::shared_ptr<JobStoreServer> server;
  if (context.rank == 0) server = std::make_shared<JobStoreServer>(context.master_port, secret);
  return c10::make_intrusive<JobStore>(context.master_addr, context.master_port, secret, context.rendezvous_timeout,
                                       std::move(server));
}

}  // namespace

Context store_context_from_environment(int rank, int size, std::chrono::milliseconds timeout) {
  Context c;
  c.rank = rank;
  c.world_size = size;
  const auto number = [](const char* name) -> std::optional<long long> {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    if (*end != '\0') throw Error(std::string("nano: bad ") + name + "='" + v + "': expected a number");
    return n;
  };
  c.local_world_size = static_cast<int>(number("LOCAL_WORLD_SIZE").value_or(size));
  if (const char* addr = std::getenv("MASTER_ADDR")) c.master_addr = addr;
  const auto port = number("MASTER_PORT");
  if (!port || *port < 1 || *port > 65535)
    throw Error("nano: MASTER_PORT must name the rendezvous port (1-65535), got '" +
                std::string(std::getenv("MASTER_PORT") ? std::getenv("MASTER_PORT") : "") + "'");
  c.master_port = static_cast<int>(*port);
  c.rendezvous_timeout = timeout;
  return c;
}

c10::intrusive_ptr<c10d::Store> rendezvous(const Context& context, const std::string& prefix) {
  const auto timeout = context.rendezvous_timeout;
  const double seconds = timeout.count() / 1000.0;
  const auto deadline = Clock::now() + timeout;
  const char* job_dir = std::getenv(contract::kJobDir);
  const std::string file = file_store_path(job_dir ? job_dir : "", context, prefix);
  const std::string where = file.empty() ? context.master_addr + ":" + std::to_string(context.master_port) : file;
  c10::intrusive_ptr<c10d::Store> store;
  const std::string secret = job_secret_from_environment();
  if (file.empty() && !secret.empty()) {
    store = job_store(context, secret);
  } else if (file.empty()) {
    store = tcp_store(context, where);
  } else {
    check_private_job_dir(job_dir);
    try {
      store = c10::make_intrusive<c10d::FileStore>(file, context.world_size);
      store->setTimeout(timeout);
    } catch (const std::exception& e) {
      throw Error("nano: rendezvous at " + where + " failed: " + first_line(e.what()));
    }
  }
  std::vector<int> missing;
  try {
    store->set(prefix + std::to_string(context.rank), std::vector<uint8_t>{1});
    for (;;) {
      missing.clear();
      for (int r = 0; r < context.world_size; ++r) {
        if (!store->check({prefix + std::to_string(r)})) missing.push_back(r);
      }
      if (missing.empty() || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    throw Error("nano: rendezvous at " + where + " failed: " + first_line(e.what()));
  }
  if (!missing.empty()) {
    throw Error(rendezvous_timeout_message(where, seconds, missing, context.world_size));
  }
  return store;
}

}  // namespace nano
