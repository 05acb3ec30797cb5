#pragma once
// Where `nano-run --tune` keeps its winners and `-n auto` finds them: one JSON file under the
// user's cache folder ($XDG_CACHE_HOME/nano/tune.json, else ~/.cache/nano/tune.json), one entry
// per machine shape and program. The text form and the lookup are pure; reading and writing
// the file are the two thin functions at the end.
#include <optional>
#include <string>
#include <vector>

#include "core/topology.h"
#include "launcher/tune/tune_candidates.h"

namespace nano {

/// What tells two machines apart for tuning: the usable cores, their PUs, packages, NUMA
/// nodes, L3 domains and core kinds ("packages 1, numa 1 (0), l3 1, cores 2 (2 PUs 0-1), ...").
/// A cgroup limit, a new socket or SMT turned off is another machine.
std::string topology_fingerprint(const Topology& topology);

/// One stored winner.
struct TuneEntry {
  std::string fingerprint;
  std::vector<std::string> program;  ///< the program (as resolved) and its arguments
  Layout layout;
  double rate = 0;
  std::string unit;         ///< rate_unit_name
  double ratio_to_one = 0;  ///< the winner's rate over the best 1-rank layout's (0 = none measured)
  std::string tuned_at;     ///< UTC, "2026-12-02T05:10:00Z"
  int candidates = 0;       ///< layouts tried
};

/// The file's entries; throws Error saying what is wrong with `text`.
std::vector<TuneEntry> parse_tune_store(const std::string& text);
std::string tune_store_text(const std::vector<TuneEntry>& entries);
/// The entry for this machine and program, if any.
std::optional<TuneEntry> find_tune_entry(const std::vector<TuneEntry>& entries, const std::string& fingerprint,
                                         const std::vector<std::string>& program);
/// `entries` with `entry` replacing the one of its machine and program (or added).
std::vector<TuneEntry> with_tune_entry(std::vector<TuneEntry> entries, const TuneEntry& entry);

/// $XDG_CACHE_HOME/nano/tune.json, else $HOME/.cache/nano/tune.json ("" when neither is set).
std::string tune_store_path();
/// The stored entries. A missing file is none; an unreadable or corrupt one is none too, and
/// `warning` then says so in one line (the next save rewrites it).
std::vector<TuneEntry> read_tune_store(const std::string& path, std::string* warning);
/// Writes `entries` whole (a temporary file renamed over the old one), making the folder.
/// Throws Error naming the path when it cannot.
void write_tune_store(const std::string& path, const std::vector<TuneEntry>& entries);

}  // namespace nano
