#pragma once
// Whether the hosts of an elastic launch answer, asked the way their ranks are started: Open
// MPI's launch agent (ssh unless the user set another) runs `true` there, or, for the nodes of a
// Slurm allocation, Slurm tells their state. Asked after a failed attempt, for the next attempt's
// judgement (launcher/launch/elastic.h). The commands and the reading of Slurm's answer are pure;
// running them, each bounded, is the thin shell.
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "core/recipe.h"

namespace nano {

/// How the hosts are asked.
enum class ProbeWay {
  kLaunchAgent,  ///< Open MPI's launch agent runs `true` there
  kSlurm,        ///< sinfo tells the node's state (hosts of a Slurm allocation)
};

/// Pure: Open MPI's launch agent in `env`, split into words: PRTE_MCA_plm_ssh_agent (Open MPI 5),
/// else OMPI_MCA_plm_rsh_agent (Open MPI 4), else ssh; of a list such as "ssh : rsh", the first;
/// followed by the arguments Open MPI gives it (PRTE_MCA_plm_ssh_args, OMPI_MCA_plm_rsh_args).
std::vector<std::string> launch_agent(const Environment& env);

/// Pure: the command that asks `host` whether it answers: the agent with `true` (ssh in batch
/// mode, its connection bounded by `within`), or sinfo's state of node `host`.
std::vector<std::string> probe_command(ProbeWay way, const std::vector<std::string>& agent, const std::string& host,
                                       std::chrono::seconds within);

/// Pure: whether a node in Slurm's state `state` (sinfo's %T, e.g. "mixed", "down*", "drained")
/// answers: not down, drained or draining, failing, powered down or not responding ("*").
bool slurm_state_answers(const std::string& state);

/// How long a probe may take before its host counts as not answering: an ssh to a live host
/// answers in well under a second; a dead one's connection attempt is cut here.
inline constexpr std::chrono::seconds kProbeWithin{5};

/// Asks every host of `hosts` at once, each bounded by `within` (its command then SIGKILLed);
/// returns those that did not answer. Throws nothing: a probe that cannot start is no answer.
std::set<std::string> hosts_not_answering(ProbeWay way, const std::vector<std::string>& hosts, const Environment& env,
                                          std::chrono::seconds within = kProbeWithin);

}  // namespace nano
