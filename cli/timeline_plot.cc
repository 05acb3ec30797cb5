#include "cli/timeline_plot.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include <nano/error.h>

namespace nano {
namespace {

using nlohmann::json;

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

PlotData plot_data(const std::string& trace) {
  json j;
  try {
    j = json::parse(trace);
  } catch (const json::exception& e) {
    throw UsageError(std::string("not a trace of nano-run --timeline (") + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("traceEvents") || !j.contains("nanoReport"))
    throw UsageError("not a trace of nano-run --timeline (no traceEvents and nanoReport)");
  const int attempt = j.at("nanoReport").value("attempt", 0);
  const int pid = attempt + 1;
  std::map<int, std::string> titles;                  // by track
  std::map<int, std::map<double, std::string>> rows;  // by track, then start time
  for (const json& e : j.at("traceEvents")) {
    if (e.value("pid", 0) != pid) continue;
    const int tid = e.value("tid", -1);
    if (e.value("name", "") == "thread_name" && tid % 2 == 0) titles[tid] = e.at("args").at("name");
    if (e.value("ph", "") != "X" || e.value("cat", "") != "step") continue;
    const json& a = e.at("args");
    const std::string name = e.at("name");
    int first = 0, last = 0;
    const int n = std::sscanf(name.c_str(), "steps %d-%d", &first, &last) == 2 ? last - first + 1 : 1;
    if (n == 1) std::sscanf(name.c_str(), "step %d", &first);
    const double step = e.at("dur").get<double>() / 1000 / n;
    const double data = a.at("data_ms").get<double>() / n, compute = a.at("compute_ms").get<double>() / n;
    const double exchange = a.at("exchange_ms").get<double>() / n, ckpt = a.at("checkpoint_ms").get<double>() / n;
    const double other = std::max(0.0, step - data - compute - exchange - ckpt);
    char line[256];
    std::snprintf(line, sizeof line, "%d %.4f %.4f %.4f %.4f %.4f\n", first, data, compute, exchange, ckpt, other);
    rows[tid][e.at("ts").get<double>()] += line;
  }
  PlotData out;
  for (const auto& [tid, steps] : rows) {
    out.titles.push_back(titles.count(tid) ? titles[tid] : "rank " + std::to_string(tid / 2));
    for (const auto& [ts, line] : steps) out.blocks += line;
    out.blocks += "\n\n";
  }
  if (out.titles.empty()) throw UsageError("the trace holds no step of nano's DDP to draw");
  return out;
}

std::string plot_script(const PlotData& data, const std::string& data_path, const std::string& png_path) {
  std::ostringstream s;
  const size_t panels = data.titles.size();
  s << "set terminal pngcairo size 1200," << 160 + 220 * panels << " font ',10'\n"
    << "set output " << quoted(png_path) << "\n"
    << "set multiplot layout " << panels << ",1 title 'Step time by phase (ms) over the run'\n"
    << "set style fill solid 0.85 noborder\nset key outside right\nset xlabel 'step'\nset ylabel 'ms'\n"
    << "set yrange [0:*]\n";
  // Stacked from the top down: each curve is the sum of its phase and those below it.
  const char* names[] = {"optimizer and other", "checkpoint", "exchange wait", "compute", "data"};
  const char* sums[] = {"($2+$3+$4+$5+$6)", "($2+$3+$4+$5)", "($2+$3+$4)", "($2+$3)", "($2)"};
  const char* colors[] = {"#bbbbbb", "#9467bd", "#d62728", "#1f77b4", "#2ca02c"};
  for (size_t i = 0; i < panels; ++i) {
    s << "set title " << quoted(data.titles[i]) << "\nplot ";
    for (int k = 0; k < 5; ++k)
      s << (k ? ", " : "") << quoted(data_path) << " index " << i << " using 1:" << sums[k]
        << " with filledcurves x1 lc rgb '" << colors[k] << "' title '" << names[k] << "'";
    s << "\n";
  }
  s << "unset multiplot\n";
  return s.str();
}

}  // namespace nano
