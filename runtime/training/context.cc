#include <nano/context.h>

#include <sched.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include <nano/error.h>

#include <nano/communicator.h>
#include "core/parse.h"
#include "core/rank_contract.h"
#include "core/recipe.h"

namespace nano {

namespace {

const std::string* find(const Environment& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() ? nullptr : &it->second;
}

long parse_int(const Environment& env, const std::string& key, long min, long max) {
  const std::string& text = *find(env, key);
  const std::optional<long long> value = parse_integer(text, min, max);
  if (!value) {
    throw UsageError("nano: bad " + key + "='" + text + "': expected an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "]");
  }
  return static_cast<long>(*value);
}

std::optional<long> get_int(const Environment& env, const std::string& key, long min, long max) {
  if (!find(env, key)) return std::nullopt;
  return parse_int(env, key, min, max);
}

// A positive number of seconds (fractions allowed, at least 1 ms), at most about 116 days.
std::optional<std::chrono::milliseconds> get_seconds(const Environment& env, const std::string& key) {
  const std::string* text = find(env, key);
  if (!text) return std::nullopt;
  const auto value = parse_seconds(*text, std::chrono::milliseconds(1), std::chrono::seconds(10000000));
  if (!value) throw UsageError("nano: bad " + key + "='" + *text + "': expected a positive number of seconds");
  return value;
}

CommBackend parse_backend(const std::string& text) {
  if (text == "auto") return CommBackend::kAuto;
  if (text == "mpi") return CommBackend::kMpi;
  if (text == "gloo") return CommBackend::kGloo;
  throw UsageError(std::string("nano: bad ") + contract::kBackend + "='" + text + "': expected auto, mpi or gloo");
}

}  // namespace

Context context_from_env(const Environment& env, int affinity_cpus, const InitOptions& options) {
  Context c;
  const bool has_torchrun = find(env, "RANK") || find(env, "WORLD_SIZE");
  const bool has_mpi = find(env, "OMPI_COMM_WORLD_SIZE") != nullptr;
  if (has_torchrun) {
    if (!find(env, "RANK")) throw UsageError("nano: WORLD_SIZE is set but RANK is not");
    if (!find(env, "WORLD_SIZE")) throw UsageError("nano: RANK is set but WORLD_SIZE is not");
    c.world_size = static_cast<int>(parse_int(env, "WORLD_SIZE", 1, INT_MAX));
    c.rank = static_cast<int>(parse_int(env, "RANK", 0, c.world_size - 1));
    c.local_rank = static_cast<int>(get_int(env, "LOCAL_RANK", 0, c.world_size - 1).value_or(c.rank));
    c.local_world_size = static_cast<int>(get_int(env, "LOCAL_WORLD_SIZE", 1, c.world_size).value_or(c.world_size));
    c.launcher = find(env, contract::kCpus) ? Launcher::kNanoRun : Launcher::kTorchrun;
  }
  if (has_mpi) {
    int size = static_cast<int>(parse_int(env, "OMPI_COMM_WORLD_SIZE", 1, INT_MAX));
    int rank = static_cast<int>(get_int(env, "OMPI_COMM_WORLD_RANK", 0, size - 1).value_or(0));
    if (has_torchrun && (size != c.world_size || rank != c.rank)) {
      throw UsageError("nano: RANK/WORLD_SIZE=" + std::to_string(c.rank) + "/" + std::to_string(c.world_size) +
                       " disagree with OMPI_COMM_WORLD_RANK/SIZE=" + std::to_string(rank) + "/" + std::to_string(size));
    }
    if (!has_torchrun) {
      c.world_size = size;
      c.rank = rank;
      c.local_rank = static_cast<int>(get_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, size - 1).value_or(rank));
      c.local_world_size = static_cast<int>(get_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, size).value_or(size));
      c.launcher = Launcher::kMpirun;
    }
  }
  if (auto* addr = find(env, "MASTER_ADDR")) {
    if (addr->empty()) throw UsageError("nano: bad MASTER_ADDR='': expected a host name or address");
    c.master_addr = *addr;
  }
  c.master_port = static_cast<int>(get_int(env, "MASTER_PORT", 1, 65535).value_or(0));
  if (auto* cpus = find(env, contract::kCpus)) c.cpus = *cpus;

  if (c.launcher != Launcher::kNone) {
    if (auto threads = get_int(env, "OMP_NUM_THREADS", 1, 1 << 16)) {
      c.threads = static_cast<int>(*threads);
    } else if (affinity_cpus > 0) {
      c.threads = affinity_cpus;
    }
  }

  CommBackend backend = options.backend;
  if (backend == CommBackend::kAuto) {
    if (auto* text = find(env, contract::kBackend)) backend = parse_backend(*text);
  }
  if (backend == CommBackend::kAuto) {
    backend = c.world_size == 1 ? CommBackend::kSelf : has_mpi ? CommBackend::kMpi : CommBackend::kGloo;
  }
  if (backend == CommBackend::kMpi && !has_mpi && c.world_size > 1) {
    throw UsageError(
        "nano: backend mpi needs a launch under mpirun (OMPI_COMM_WORLD_SIZE is unset)"
        " for a world of " +
        std::to_string(c.world_size));
  }
  if (backend == CommBackend::kGloo && c.world_size > 1 && c.master_port == 0) {
    throw UsageError("nano: MASTER_PORT is unset: the gloo communicator needs it for a world of " +
                     std::to_string(c.world_size));
  }
  if (backend == CommBackend::kSelf && c.world_size > 1) {
    throw UsageError("nano: backend self cannot serve a world of " + std::to_string(c.world_size));
  }
  c.backend = backend;

  c.rendezvous_timeout = options.rendezvous_timeout
                             ? *options.rendezvous_timeout
                             : get_seconds(env, contract::kRendezvousTimeout).value_or(c.rendezvous_timeout);
  c.collective_timeout = options.collective_timeout
                             ? *options.collective_timeout
                             : get_seconds(env, contract::kCollectiveTimeout).value_or(c.collective_timeout);
  return c;
}

World init(const InitOptions& options) {
  cpu_set_t mask;
  int affinity = 0;
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) affinity = CPU_COUNT(&mask);
  World world;
  world.context = context_from_env(current_environment(), affinity, options);
  if (options.set_threads && world.context.threads > 0) {
    at::set_num_threads(world.context.threads);
  }
  world.comm = make_communicator(world.context);
  return world;
}

}  // namespace nano
