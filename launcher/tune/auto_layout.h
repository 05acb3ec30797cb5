#pragma once
// `-n auto` (nano-run) and TorchNanoOptions::num_processes = nano::kAuto: the layout tuned for
// this machine and this program, from the store (launcher/tune/tune_store.h), or a tuning first
// (launcher/tune/tuner.h) whose winner is stored. Shared by nano-run and the in-program launch.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/prepare/launch_types.h"
#include "launcher/tune/tuner.h"

namespace nano {

/// What the store holds for a launch.
struct StoredLayout {
  std::string path;                  ///< the store's file ("" = no cache folder known)
  std::string fingerprint;           ///< this machine's (the launch's topology)
  std::vector<std::string> program;  ///< program_key(argv)
  std::vector<TuneEntry> entries;    ///< everything stored
  std::optional<TuneEntry> hit;      ///< the entry for this machine and program
  std::string warning;               ///< the cache was unreadable or corrupt ("" = fine)
};

/// Reads the store for `o` (its topology: this machine, --topology or --synthetic) and `argv`.
StoredLayout look_up_layout(const LaunchOptions& o, const std::vector<std::string>& argv);

/// "2 ranks x 1 thread, jemalloc, tuned 2026-12-02T05:10:00Z: 812.3 samples/s, 1.59x of 1 rank"
std::string stored_layout_text(const TuneEntry& entry);

/// Tunes `argv` (printing every trial and the table through `say`), stores the winner and
/// returns it; none when the tuning was interrupted (`interrupted_by` set) or every layout
/// failed. Throws as prepare_tuning does, before any trial.
std::optional<TuneEntry> tune_and_store(const LaunchOptions& o, const TuneOptions& options,
                                        const std::vector<std::string>& argv, StoredLayout& store,
                                        const std::function<void(const std::string&)>& say, int* interrupted_by);

}  // namespace nano
