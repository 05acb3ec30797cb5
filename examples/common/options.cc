#include "examples/common/options.h"
#include <nano/in_program_error.h>

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <nano/error.h>

namespace nano::examples {
namespace {

std::string number(double v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

// Some CLI11 messages span lines; errors must be one line.
std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

void validate_example_options(const ExampleOptions& o) {
  if (o.epochs < 1) throw UsageError("--epochs must be at least 1, got " + std::to_string(o.epochs));
  if (o.batch_size < 1) throw UsageError("--batch-size must be at least 1, got " + std::to_string(o.batch_size));
  if (!(o.lr > 0) || !std::isfinite(o.lr)) throw UsageError("--lr must be a positive number, got " + number(o.lr));
  if (o.num_processes < 1 && o.num_processes != kAutoProcesses)
    throw UsageError("--num-processes must be at least 1, got " + std::to_string(o.num_processes));
  if (o.max_steps_per_epoch < 0)
    throw UsageError("--max-steps-per-epoch must be at least 0, got " + std::to_string(o.max_steps_per_epoch));
  if (o.steps < 1) throw UsageError("--steps must be at least 1, got " + std::to_string(o.steps));
  if (o.test_limit < 0) throw UsageError("--test-limit must be at least 0, got " + std::to_string(o.test_limit));
  if (o.checkpoint_every < 1)
    throw UsageError("--checkpoint-every must be at least 1, got " + std::to_string(o.checkpoint_every));
  if (o.checkpoint_keep < 1)
    throw UsageError("--checkpoint-keep must be at least 1, got " + std::to_string(o.checkpoint_keep));
  if (o.max_restarts < 0) throw UsageError("--max-restarts must be at least 0, got " + std::to_string(o.max_restarts));
  if (o.backend != "subprocess" && o.backend != "mpi")
    throw UsageError("--backend must be subprocess or mpi, got '" + o.backend + "'");
  if (o.precision != "32" && o.precision != "64" && o.precision != "bf16")
    throw UsageError("--precision must be 32, 64 or bf16, got '" + o.precision + "'");
}

ParsedOptions parse_example_options(int argc, const char* const* argv, const ExampleOptions& defaults,
                                    const OptionsSpec& spec) {
  ParsedOptions out{defaults, ""};
  ExampleOptions& o = out.options;
  CLI::App app(spec.description, spec.program);
  // Values are read as strings and converted here so every bad value gets the same message.
  std::string epochs, batch, lr, procs, max_steps, steps, test_limit, checkpoint_every, checkpoint_keep, max_restarts,
      seed;
  if (spec.epochs) {
    app.add_option("--epochs", epochs, "training epochs (default " + std::to_string(o.epochs) + ")")->type_name("INT");
    app.add_option("--max-steps-per-epoch", max_steps, "stop each epoch after this many steps (0 = all)")
        ->type_name("INT");
    app.add_option("--test-limit", test_limit, "evaluate only the first N test images (0 = all)")->type_name("INT");
  }
  if (spec.steps)
    app.add_option("--steps", steps, "timed training steps (default " + std::to_string(o.steps) + ")")
        ->type_name("INT");
  app.add_option("--batch-size", batch, "batch size per process (default " + std::to_string(o.batch_size) + ")")
      ->type_name("INT");
  app.add_option("--lr", lr, "base learning rate (default " + number(o.lr) + ")")->type_name("FLOAT");
  app.add_option("--seed", seed, "torch's random seed: the initial weights (default 0)")->type_name("INT");
  app.add_option("--num-processes", procs,
                 "training processes (default " + std::to_string(o.num_processes) + ")" +
                     (spec.in_program ? "; auto = the layout nano-run --tune stored for this machine and "
                                        "these arguments (tuned first when none is)"
                                      : ""))
      ->type_name(spec.in_program ? "INT|auto" : "INT");
  if (spec.data_dir)
    app.add_option("--data-dir", o.data_dir, "folder holding the dataset's .gz files")->type_name("DIR");
  if (spec.checkpoints) {
    app.add_option("--checkpoint-dir", o.checkpoint_dir,
                   "save checkpoints here and, when it holds one, resume from the newest")
        ->type_name("DIR");
    app.add_option("--checkpoint-every", checkpoint_every,
                   "steps between checkpoints (default " + std::to_string(o.checkpoint_every) + ")")
        ->type_name("INT");
    app.add_option("--checkpoint-keep", checkpoint_keep,
                   "checkpoints kept: the newest that verify (default " + std::to_string(o.checkpoint_keep) + ")")
        ->type_name("INT");
  }
  bool no_auto_lr = false;
  if (spec.in_program) {
    app.add_option("--max-restarts", max_restarts,
                   "start the ranks again, from the newest checkpoint, after one fails (default 0)")
        ->type_name("INT");
    app.add_option("--timeline", o.timeline,
                   "record where every rank's time goes: a trace FILE (Perfetto, chrome://tracing) and a report")
        ->type_name("FILE");
    app.add_flag("--no-auto-lr", no_auto_lr, "keep the learning rate fixed (no warm-up to N times it)");
    app.add_option("--backend", o.backend,
                   "how --num-processes ranks start: subprocess or mpi (default " + o.backend + ")");
  }
  bool equal_batches = false;
  if (spec.in_program || spec.steps) {
    app.add_flag("--equal-batches", equal_batches,
                 "every rank takes exactly --batch-size samples per step (default: nano splits each step's "
                 "ranks x batch-size samples by the ranks' measured speed)");
    app.add_flag("--step-times", o.step_times,
                 "add each timed step's wall time in ms to the nano-result line (for benchmark scripts)");
    app.add_option("--precision", o.precision,
                   "32, 64 or bf16: mixed precision, forward and loss under CPU autocast to bfloat16, "
                   "weights float32 (default " +
                       o.precision + ")")
        ->type_name("32|64|bf16");
    app.add_flag("--channels-last", o.channels_last, "the model and every 4-D input in channels-last memory format");
    app.add_flag("--bf16-gradients", o.bf16_gradients,
                 "all-reduce the gradients as bfloat16 (half the bytes; summed in float)");
    app.add_flag("--print-weights", o.print_weights,
                 "print 'weights <hex>', an FNV-1a-64 fingerprint of the trained parameters' and buffers' bytes, so "
                 "runs can be compared bit for bit");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out.help = app.help();
    return out;
  } catch (const CLI::ParseError& e) {
    throw UsageError(one_line(e.what()));
  }
  auto to_int = [](const std::string& flag, const std::string& text, auto& dst) {
    if (text.empty()) return;
    try {
      size_t used = 0;
      const long long v = std::stoll(text, &used);
      if (used != text.size()) throw std::invalid_argument(text);
      using T = std::remove_reference_t<decltype(dst)>;
      if (v < static_cast<long long>(std::numeric_limits<T>::min()) ||
          v > static_cast<long long>(std::numeric_limits<T>::max()))
        throw std::out_of_range(text);
      dst = static_cast<T>(v);
    } catch (const std::logic_error&) {
      throw UsageError(flag + ": '" + text + "' is not a valid integer");
    }
  };
  to_int("--epochs", epochs, o.epochs);
  to_int("--max-steps-per-epoch", max_steps, o.max_steps_per_epoch);
  to_int("--steps", steps, o.steps);
  to_int("--test-limit", test_limit, o.test_limit);
  to_int("--checkpoint-every", checkpoint_every, o.checkpoint_every);
  to_int("--checkpoint-keep", checkpoint_keep, o.checkpoint_keep);
  to_int("--max-restarts", max_restarts, o.max_restarts);
  to_int("--seed", seed, o.seed);
  if (no_auto_lr) o.auto_lr = false;
  if (equal_batches) o.balance = false;
  to_int("--batch-size", batch, o.batch_size);
  if (spec.in_program && procs == "auto")
    o.num_processes = kAutoProcesses;
  else
    to_int("--num-processes", procs, o.num_processes);
  if (!lr.empty()) {
    try {
      size_t used = 0;
      o.lr = std::stod(lr, &used);
      if (used != lr.size()) throw std::invalid_argument(lr);
    } catch (const std::logic_error&) {
      throw UsageError("--lr: '" + lr + "' is not a valid number");
    }
  }
  validate_example_options(o);
  return out;
}

int run_example_main(int argc, const char* const* argv, const ExampleOptions& defaults, const OptionsSpec& spec,
                     const std::function<int(const ExampleOptions&)>& run) {
  try {
    const ParsedOptions parsed = parse_example_options(argc, argv, defaults, spec);
    if (!parsed.help.empty()) {
      std::fputs(parsed.help.c_str(), stdout);
      return 0;
    }
    return run(parsed.options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", spec.program.c_str(), e.what());
    return 2;
  } catch (const RankFailedError& e) {
    // nano-run's contract: the failing rank's code, 128+signal, 130 on Ctrl-C.
    std::fprintf(stderr, "%s: error: %s\n", spec.program.c_str(), e.what());
    return e.launch_exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", spec.program.c_str(), e.what());
    return 1;
  }
}

}  // namespace nano::examples
