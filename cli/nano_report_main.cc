// nano-report TRACE [--png FILE]: the report of a `nano-run --timeline` trace, told again, and its
// picture: each rank's step time over the run, stacked by phase (cli/timeline_plot.h), drawn
// by gnuplot into TRACE's name with .png (or FILE). Exit 0; 2 for a bad argument or a file that
// is not such a trace; 1 when gnuplot is missing or fails (the report is told first).
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nano/error.h>
#include "cli/timeline_plot.h"
#include "launcher/timeline/timeline_merge.h"

namespace {

constexpr const char* kUsage = "usage: nano-report TRACE [--png FILE]   (TRACE: written by nano-run --timeline)";

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw nano::UsageError("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// gnuplot SCRIPT's exit code (127 when it cannot be started).
int run_gnuplot(const std::string& script) {
  const pid_t pid = fork();
  if (pid == 0) {
    execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string trace, png;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      std::cout << kUsage
                << "\nTells the run's report again and draws TRACE.png: each rank's step time, stacked "
                   "by phase (see docs/timeline.md)."
                << std::endl;
      return 0;
    }
    if (args[i] == "--png" && i + 1 < args.size()) {
      png = args[++i];
    } else if (trace.empty() && !args[i].empty() && args[i][0] != '-') {
      trace = args[i];
    } else {
      std::cerr << "nano-report: unexpected argument '" << args[i] << "'; " << kUsage << std::endl;
      return 2;
    }
  }
  if (trace.empty()) {
    std::cerr << "nano-report: missing TRACE; " << kUsage << std::endl;
    return 2;
  }
  if (png.empty())
    png = (trace.size() > 5 && trace.substr(trace.size() - 5) == ".json" ? trace.substr(0, trace.size() - 5) : trace) +
          ".png";
  nano::PlotData data;
  try {
    const std::string text = read_all(trace);
    data = nano::plot_data(text);
    // The report rides in the trace (launcher/timeline/timeline_merge.h, trace_json).
    for (const std::string& line : nano::report_lines(nano::report_from_json(text), trace))
      std::cout << line.substr(std::strlen("nano-run: ")) << "\n";
  } catch (const nano::UsageError& e) {
    std::cerr << "nano-report: " << trace << ": " << e.what() << std::endl;
    return 2;
  }
  char folder[] = "/tmp/nano-report-XXXXXX";
  if (!mkdtemp(folder)) {
    std::cerr << "nano-report: cannot make a temporary folder: " << std::strerror(errno) << std::endl;
    return 1;
  }
  const std::string data_path = std::string(folder) + "/steps.dat", script = std::string(folder) + "/plot.gp";
  std::ofstream(data_path) << data.blocks;
  std::ofstream(script) << nano::plot_script(data, data_path, png);
  const int code = run_gnuplot(script);
  std::remove(data_path.c_str());
  std::remove(script.c_str());
  rmdir(folder);
  if (code == 127) {
    std::cerr << "nano-report: gnuplot not found (Debian: apt install gnuplot-nox); no picture drawn" << std::endl;
    return 1;
  }
  if (code != 0) {
    std::cerr << "nano-report: gnuplot failed (exit " << code << "); no picture drawn" << std::endl;
    return 1;
  }
  std::cout << "picture: " << png << std::endl;
  return 0;
}
