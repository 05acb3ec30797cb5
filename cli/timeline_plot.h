#pragma once
// nano-report's picture of a timeline: each rank's step time over the run, stacked by phase,
// one panel per rank, drawn by gnuplot. Pure: the data and the script from the trace's text; the
// program that writes them and runs gnuplot is cli/nano_report_main.cc.
#include <string>
#include <vector>

namespace nano {

/// What plot_script draws from.
struct PlotData {
  std::vector<std::string> titles;  ///< one per rank, in the data's block order: "rank 1 (hostB, CPUs 4-7)"
  /// gnuplot data: one block per rank (separated by two blank lines, so `index` picks one), a
  /// line per step of the trace's last attempt: STEP DATA COMPUTE EXCHANGE CHECKPOINT OTHER (ms);
  /// a 100-step interval is one line of its per-step means.
  std::string blocks;
};

/// Pure: the plot data of a trace written by `nano-run --timeline`. Throws UsageError when the
/// text is not such a trace or holds no step.
PlotData plot_data(const std::string& trace);

/// Pure: the gnuplot script that draws `data` (held in `data_path`) into the PNG `png_path`.
std::string plot_script(const PlotData& data, const std::string& data_path, const std::string& png_path);

}  // namespace nano
