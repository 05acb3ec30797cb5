#include "python/launch.h"

#include <pybind11/stl.h>

#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <nano/in_program.h>
#include "core/setting_list.h"
#include "launcher/launch/launcher.h"
#include "launcher/prepare/launch_setup.h"
#include "runtime/options/in_program_options.h"

namespace py = pybind11;

namespace nano::python {

namespace {

template <class T>
const char* expected_type() {
  if constexpr (std::is_same_v<T, bool>) return "a bool";
  if constexpr (std::is_integral_v<T>) return "an int";
  if constexpr (std::is_floating_point_v<T>) return "a number";
  if constexpr (std::is_same_v<T, std::string>) return "a str";
  return "a list of lists of CPU numbers";
}

// Sets one TorchNanoOptions field from a Python value; a TypeError names a value of another type.
template <auto Member>
void assign(TorchNanoOptions& o, const py::handle& value, const std::string& name) {
  using T = std::remove_reference_t<decltype(o.*Member)>;
  try {
    o.*Member = value.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error("nano: " + name + " must be " + expected_type<T>() + ", got " +
                         py::repr(value).cast<std::string>());
  }
}

using Setter = void (*)(TorchNanoOptions&, const py::handle&, const std::string&);

// The Python keywords are TorchNanoOptions' field names, the launch settings' from their list
// (core/setting_list.h): errors from the launch path name them
// as the C++ API's do (in_program::program_message), and so name what the Python caller typed.
const std::map<std::string, Setter>& setters() {
  using O = TorchNanoOptions;
  static const std::map<std::string, Setter> table = {
      {"num_processes", &assign<&O::num_processes>},
      {"cpu_for_each_process", &assign<&O::cpu_for_each_process>},
      {"distributed_backend", &assign<&O::distributed_backend>},
      {"precision", &assign<&O::precision>},
      {"checkpoint_dir", &assign<&O::checkpoint_dir>},
      {"checkpoint_every_steps", &assign<&O::checkpoint_every_steps>},
      {"checkpoint_every_seconds", &assign<&O::checkpoint_every_seconds>},
      {"checkpoint_keep", &assign<&O::checkpoint_keep>},
      {"checkpoint_shared_folder", &assign<&O::checkpoint_shared_folder>},
#define NANO_PYTHON_SETTER(id, key, flag, field, member, metavar, docs, help) {#field, &assign<&O::field>},
      NANO_SHARED_SETTINGS(NANO_PYTHON_SETTER)
#undef NANO_PYTHON_SETTER
  };
  return table;
}

TorchNanoOptions options_of(const py::dict& given) {
  TorchNanoOptions o;
  for (const auto& [key, value] : given) {
    const std::string name = py::str(key);
    const auto setter = setters().find(name);
    if (setter == setters().end()) throw py::type_error("nano: unknown launch option " + name);
    setter->second(o, value, name);
  }
  return o;
}

// The launch's options with everything the Python front end adds, prepared once (for a launch
// or, for the check, a dry run): a UsageError (a bad setting, a bad plan) becomes a ValueError
// worded with the keywords' names, before anything starts.
Setup prepared(const py::dict& given, const std::vector<int>& output_ranks, const std::vector<std::string>& argv,
               const std::map<std::string, std::string>& extra_env, const std::vector<std::string>& caller_files,
               Purpose purpose) {
  try {
    const TorchNanoOptions o = options_of(given);
    // The ranks apply these; checked here with the C++ API's words.
    in_program::precision_of(o);
    checkpoint_options_of(o);
    LaunchOptions l = in_program::launch_options_of(o);
    l.output_ranks = output_ranks;
    // Output from rank 0 only reads as one process's: no "[rank 0] " tags.
    l.tag_output = output_ranks.size() != 1;
    l.extra_env = extra_env;
    l.caller_files = caller_files;
    return prepare(l, argv, purpose);
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
    d["raised"] = r.failure->raised;
  }
  return d;
}

}  // namespace

void bind_launch(py::module_& m) {
  m.def(
      "check_launch",
      [](const py::dict& options, const std::vector<int>& output_ranks, const std::vector<std::string>& argv) {
        prepared(options, output_ranks, argv, {}, {}, Purpose::kDryRun);
      },
      py::arg("options"), py::arg("output_ranks"), py::arg("argv"),
      "Checks a launch as launch() would (the options and the plan), starting nothing; raises ValueError "
      "or TypeError naming the option.");
  m.def(
      "launch",
      [](const py::dict& options, const std::vector<int>& output_ranks, const std::vector<std::string>& argv,
         const std::map<std::string, std::string>& extra_env, const std::vector<std::string>& caller_files) {
        Setup s = prepared(options, output_ranks, argv, extra_env, caller_files, Purpose::kLaunch);
        LaunchResult r;
        {
          // The ranks are tied to this thread and supervised from it; Python's other threads run.
          py::gil_scoped_release release;
          r = launch(std::move(s));
        }
        return result_of(r);
      },
      py::arg("options"), py::arg("output_ranks"), py::arg("argv"), py::arg("extra_env"), py::arg("caller_files"),
      "Starts argv as the planned ranks through nano's launcher and waits for all of them. Returns "
      "{exit_code, interrupted_by, attempts} and, when a rank failed, {rank, host, rank_exit_code, "
      "signal, stderr_tail, lost, raised} of the first one. output_ranks: whose output is shown (empty: all).");
}

}  // namespace nano::python
