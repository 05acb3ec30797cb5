#include "runtime/python/launch.h"

#include <pybind11/stl.h>

#include <map>
#include <string>
#include <vector>

#include <nano/in_program.h>
#include "cli/dry_run.h"
#include "cli/launcher.h"
#include "runtime/in_program_options.h"

namespace py = pybind11;

namespace nano::python {

namespace {

template <class T>
T field(const py::handle& value, const std::string& name, const char* expected) {
  try {
    return value.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error("nano: " + name + " must be " + expected + ", got " + py::repr(value).cast<std::string>());
  }
}

// The Python keywords are TorchNanoOptions' field names: errors from the launch path name them
// as the C++ API's do (in_program::program_message), and so name what the Python caller typed.
TorchNanoOptions options_of(const py::dict& given) {
  TorchNanoOptions o;
  for (const auto& [key, value] : given) {
    const std::string name = py::str(key);
    if (name == "num_processes") o.num_processes = field<int>(value, name, "an int");
    else if (name == "cpu_for_each_process")
      o.cpu_for_each_process = field<std::vector<std::vector<int>>>(value, name, "a list of lists of CPU numbers");
    else if (name == "distributed_backend") o.distributed_backend = field<std::string>(value, name, "a str");
    else if (name == "precision") o.precision = field<std::string>(value, name, "32, 64 or 'bf16'");
    else if (name == "checkpoint_dir") o.checkpoint_dir = field<std::string>(value, name, "a str");
    else if (name == "checkpoint_every_steps") o.checkpoint_every_steps = field<int64_t>(value, name, "an int");
    else if (name == "checkpoint_every_seconds") o.checkpoint_every_seconds = field<double>(value, name, "a number");
    else if (name == "checkpoint_keep") o.checkpoint_keep = field<int>(value, name, "an int");
    else if (name == "oversubscribe") o.oversubscribe = field<bool>(value, name, "a bool");
    else if (name == "hostfile") o.hostfile = field<std::string>(value, name, "a str");
    else if (name == "hosts") o.hosts = field<std::string>(value, name, "a str");
    else if (name == "log_dir") o.log_dir = field<std::string>(value, name, "a str");
    else if (name == "grace_period_ms") o.grace_period_ms = field<int>(value, name, "an int");
    else if (name == "max_restarts") o.max_restarts = field<int>(value, name, "an int");
    else if (name == "restart_delay_ms") o.restart_delay_ms = field<int>(value, name, "an int");
    else if (name == "heartbeat_timeout_ms") o.heartbeat_timeout_ms = field<int>(value, name, "an int");
    else throw py::type_error("nano: unknown launch option " + name);
  }
  return o;
}

// The launch's options with everything the Python front end adds; UsageError (a bad setting,
// a bad plan) becomes a ValueError worded with the keywords' names, before anything starts.
LaunchOptions prepared(const py::dict& given, const std::vector<int>& output_ranks, const std::vector<std::string>& argv) {
  try {
    const TorchNanoOptions o = options_of(given);
    // The ranks apply these; checked here with the C++ API's words.
    in_program::precision_of(o);
    checkpoint_options_of(o);
    LaunchOptions l = in_program::launch_options_of(o);
    l.output_ranks = output_ranks;
    // Output from rank 0 only reads as one process's: no "[rank 0] " tags.
    l.tag_output = output_ranks.size() != 1;
    dry_run(l, argv);
    return l;
  } catch (const UsageError& e) {
    throw py::value_error(in_program::program_message(e));
  }
}

py::dict result_of(const LaunchResult& r) {
  py::dict d;
  d["exit_code"] = r.exit_code;
  d["interrupted_by"] = r.interrupted_by;
  d["attempts"] = r.attempts;
  if (r.failure) {
    d["rank"] = r.failure->rank;
    d["host"] = r.failure->host;
    d["rank_exit_code"] = r.failure->exit_code;
    d["signal"] = r.failure->signal;
    d["stderr_tail"] = r.failure->stderr_tail;
    d["lost"] = r.failure->lost;
  }
  return d;
}

}  // namespace

void bind_launch(py::module_& m) {
  m.def(
      "check_launch",
      [](const py::dict& options, const std::vector<int>& output_ranks, const std::vector<std::string>& argv) {
        prepared(options, output_ranks, argv);
      },
      py::arg("options"), py::arg("output_ranks"), py::arg("argv"),
      "Checks a launch as launch() would (the options and the plan), starting nothing; raises ValueError "
      "or TypeError naming the option.");
  m.def(
      "launch",
      [](const py::dict& options, const std::vector<int>& output_ranks, const std::vector<std::string>& argv,
         const std::map<std::string, std::string>& extra_env, const std::vector<std::string>& caller_files) {
        LaunchOptions l = prepared(options, output_ranks, argv);
        l.extra_env = extra_env;
        l.caller_files = caller_files;
        LaunchResult r;
        {
          // The ranks are tied to this thread and supervised from it; Python's other threads run.
          py::gil_scoped_release release;
          r = launch(l, argv);
        }
        return result_of(r);
      },
      py::arg("options"), py::arg("output_ranks"), py::arg("argv"), py::arg("extra_env"), py::arg("caller_files"),
      "Starts argv as the planned ranks through nano's launcher and waits for all of them. Returns "
      "{exit_code, interrupted_by, attempts} and, when a rank failed, {rank, host, rank_exit_code, "
      "signal, stderr_tail, lost} of the first one. output_ranks: whose output is shown (empty: all).");
}

}  // namespace nano::python
