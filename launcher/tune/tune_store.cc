#include "launcher/tune/tune_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include <nano/error.h>
#include "core/cpulist.h"
#include "core/file_beside.h"

namespace nano {
namespace {

Allocator allocator_of(const std::string& name) {
  if (name == "jemalloc") return Allocator::kJemalloc;
  if (name == "tcmalloc") return Allocator::kTcmalloc;
  if (name == "system") return Allocator::kSystem;
  if (name == "auto") return Allocator::kAutomatic;
  throw Error("unknown allocator '" + name + "'");
}

}  // namespace

std::string topology_fingerprint(const Topology& t) {
  std::ostringstream out;
  std::map<int, int> per_numa;
  int efficiency = 0;
  std::vector<int> pus;
  for (const Core& c : t.cores) {
    ++per_numa[c.numa_node];
    if (c.efficiency) ++efficiency;
    pus.insert(pus.end(), c.pus.begin(), c.pus.end());
  }
  out << "packages " << t.packages << ", numa";
  for (const auto& [node, cores] : per_numa) out << " " << node << ":" << cores;
  out << ", l3 " << t.l3_domains << ", cores " << t.cores.size() << " (" << efficiency << " efficiency), PUs "
      << format_cpu_list(pus) << " of " << format_cpu_list(t.present_pus);
  return out.str();
}

std::vector<TuneEntry> parse_tune_store(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw Error(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("entries") || !j["entries"].is_array()) throw Error("no \"entries\" list");
  std::vector<TuneEntry> entries;
  try {
    for (const auto& e : j["entries"]) {
      TuneEntry t;
      t.fingerprint = e.at("machine").get<std::string>();
      t.program = e.at("program").get<std::vector<std::string>>();
      const auto& l = e.at("layout");
      t.layout.ranks = l.at("ranks").get<int>();
      t.layout.threads = l.at("threads").get<int>();
      t.layout.allocator = allocator_of(l.at("allocator").get<std::string>());
      if (t.layout.ranks < 1 || t.layout.threads < 1) throw Error("a layout of fewer than 1 rank or thread");
      t.rate = e.value("rate", 0.0);
      t.unit = e.value("unit", "");
      t.ratio_to_one = e.value("ratio_to_one_rank", 0.0);
      t.tuned_at = e.value("tuned_at", "");
      t.candidates = e.value("candidates", 0);
      entries.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("an entry is malformed: ") + e.what());
  }
  return entries;
}

std::string tune_store_text(const std::vector<TuneEntry>& entries) {
  nlohmann::json j;
  j["version"] = 1;
  j["entries"] = nlohmann::json::array();
  for (const TuneEntry& t : entries) {
    j["entries"].push_back({{"machine", t.fingerprint},
                            {"program", t.program},
                            {"layout",
                             {{"ranks", t.layout.ranks},
                              {"threads", t.layout.threads},
                              {"allocator", allocator_name(t.layout.allocator)}}},
                            {"rate", t.rate},
                            {"unit", t.unit},
                            {"ratio_to_one_rank", t.ratio_to_one},
                            {"tuned_at", t.tuned_at},
                            {"candidates", t.candidates}});
  }
  return j.dump(2) + "\n";
}

std::optional<TuneEntry> find_tune_entry(const std::vector<TuneEntry>& entries, const std::string& fingerprint,
                                         const std::vector<std::string>& program) {
  for (const TuneEntry& t : entries)
    if (t.fingerprint == fingerprint && t.program == program) return t;
  return std::nullopt;
}

std::vector<TuneEntry> with_tune_entry(std::vector<TuneEntry> entries, const TuneEntry& entry) {
  for (TuneEntry& t : entries) {
    if (t.fingerprint == entry.fingerprint && t.program == entry.program) {
      t = entry;
      return entries;
    }
  }
  entries.push_back(entry);
  return entries;
}

std::string tune_store_path() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') return std::string(xdg) + "/nano/tune.json";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/nano/tune.json";
  return "";
}

std::vector<TuneEntry> read_tune_store(const std::string& path, std::string* warning) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  try {
    return parse_tune_store(text.str());
  } catch (const Error& e) {
    if (warning) *warning = "ignoring the tuning cache " + path + " (" + e.what() + "); it is written anew";
    return {};
  }
}

void write_tune_store(const std::string& path, const std::vector<TuneEntry>& entries) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  try {
    write_file_beside(path, tune_store_text(entries));
  } catch (const Error&) {
    throw Error("cannot write the tuning cache " + path);
  }
}

}  // namespace nano
