#include "launcher/tune/auto_layout.h"

#include <iomanip>
#include <sstream>

#include <nano/error.h>
#include "launcher/prepare/launch_setup.h"
#include "launcher/process/signals.h"

namespace nano {

StoredLayout look_up_layout(const LaunchOptions& o, const std::vector<std::string>& argv) {
  StoredLayout s;
  s.path = tune_store_path();
  s.fingerprint = topology_fingerprint(load_topology(o.topology_xml, o.synthetic));
  s.program = program_key(argv);
  if (!s.path.empty()) s.entries = read_tune_store(s.path, &s.warning);
  s.hit = find_tune_entry(s.entries, s.fingerprint, s.program);
  return s;
}

std::string stored_layout_text(const TuneEntry& e) {
  std::ostringstream out;
  out << layout_text(e.layout) << ", tuned " << e.tuned_at << ": " << std::fixed << std::setprecision(1) << e.rate
      << " " << e.unit;
  if (e.ratio_to_one > 0) out << ", " << std::setprecision(2) << e.ratio_to_one << "x of 1 rank";
  return out.str();
}

std::optional<TuneEntry> tune_and_store(const LaunchOptions& o, const TuneOptions& options,
                                        const std::vector<std::string>& argv, StoredLayout& store,
                                        const std::function<void(const std::string&)>& say, int* interrupted_by) {
  const std::vector<Layout> layouts = prepare_tuning(o, options, argv);
  const TuneResult result = tune(o, options, argv, layouts, say);
  const std::string speaker = tuning_speaker(o.front_end);
  if (result.interrupted_by) {
    if (interrupted_by) *interrupted_by = result.interrupted_by;
    say(speaker + ": tuning stopped by " + signal_name(result.interrupted_by) + "; nothing stored");
    return std::nullopt;
  }
  std::istringstream table(format_tune_table(result, options, o.front_end));
  for (std::string line; std::getline(table, line);) say(line);
  if (!result.ranking.winner) {
    say(speaker + ": tune: every layout failed; nothing stored");
    return std::nullopt;
  }
  const TuneEntry entry = tune_entry_of(result, store.fingerprint, store.program);
  if (store.path.empty()) {
    say(speaker + ": tune: no cache folder (neither XDG_CACHE_HOME nor HOME is set); the choice is not stored");
  } else {
    store.entries = with_tune_entry(store.entries, entry);
    try {
      write_tune_store(store.path, store.entries);
      say(speaker + ": tune: stored " + layout_text(entry.layout) + " for -n auto in " + store.path);
    } catch (const Error& e) {
      say(speaker + ": warning: " + e.what() + "; the choice is not stored");
    }
  }
  store.hit = entry;
  return entry;
}

}  // namespace nano
