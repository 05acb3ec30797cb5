// nano-init: prints the environment recipe for this machine (the bigdl-nano-init equivalent).
//   eval "$(nano-init)"          apply it in bash/zsh
//   nano-init --explain          each variable with its reason
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include <nano/error.h>
#include "core/cpulist.h"
#include "core/planner.h"
#include "core/recipe.h"
#include "core/setting.h"
#include "core/shell.h"
#include "core/topology.h"

namespace {

// Where every usage error points: the page that explains nano-init's flags.
constexpr const char* kSeeDocs = " (see docs/nano-init.md)";

// nano-init's command line as typed (nano::InitOptions is the runtime's, another thing).
struct InitCommand {
  std::string shell = "bash";
  bool json = false;
  bool unset = false;
  bool explain = false;
  bool jemalloc = false;
  bool tcmalloc = false;
  bool system_allocator = false;
  std::string allocator;  // "" = automatic unless a short flag says otherwise
  bool disable_openmp = false;
  std::optional<int> threads;
  std::string openmp = "auto";
  std::string topology_xml;
  std::string synthetic;
  std::string allowed_cpus;
  bool show_topology = false;
  std::optional<int> plan;
  std::string cpu_lists;  // --cpu-for-each-process as typed
  nano::PlanOptions plan_options;
};

void setup_init(CLI::App& app, InitCommand& o) {
  app.description(
      "Prints the environment that makes a libtorch process run well on this machine's CPUs:\n"
      "OpenMP threads, OpenMP binding policy and a preloaded memory allocator.");
  auto* shell = app.add_option("--shell", o.shell, "shell syntax: bash, zsh, sh or fish")->capture_default_str();
  auto* json = app.add_flag("--json", o.json,
                            "print a JSON object of name -> value instead (with --show-topology: "
                            "the machine as one JSON object)");
  auto* unset = app.add_flag("--unset", o.unset, "print what undoes the recipe");
  app.add_flag("--explain", o.explain, "precede each variable with a comment saying why");
  auto* je = app.add_flag("-j,--jemalloc", o.jemalloc, "preload jemalloc (default when installed)");
  auto* tc = app.add_flag("-t,--tcmalloc", o.tcmalloc, "preload tcmalloc");
  auto* sys = app.add_flag("-c,--system-allocator", o.system_allocator, "use glibc malloc");
  auto* alloc = app.add_option("--allocator", o.allocator, "jemalloc, tcmalloc, system or auto");
  je->excludes(tc, sys, alloc);
  tc->excludes(sys, alloc);
  sys->excludes(alloc);
  app.add_flag("-o,--disable-openmp", o.disable_openmp, "leave every OpenMP variable out");
  app.add_option("-r,--threads", o.threads, "OMP_NUM_THREADS (default: physical cores)");
  app.add_option("--openmp", o.openmp, "OpenMP runtime: gnu (libgomp), intel (libiomp5) or auto")
      ->capture_default_str();
  auto* xml = app.add_option("--topology", o.topology_xml,
                             "describe the machine in this hwloc "
                             "XML file (lstopo file.xml)");
  auto* syn = app.add_option("--synthetic", o.synthetic,
                             "describe a machine in hwloc synthetic form, e.g. "
                             "\"pack:2 numa:2 core:8 pu:2\"");
  xml->excludes(syn);
  app.add_option("--allowed-cpus", o.allowed_cpus,
                 "only these CPUs are usable (as a cpuset would say), e.g. 0-7,16-23");
  auto* show =
      app.add_flag("--show-topology", o.show_topology, "print the machine and exit (with --json: as one JSON object)");
  auto* plan = app.add_option("--plan", o.plan, "print how N ranks would share the machine");
  app.add_option("--cores-per-process", o.plan_options.cores_per_process, "with --plan: physical cores per rank");
  app.add_option("--cpu-for-each-process", o.cpu_lists,
                 "with --plan: explicit CPU lists, ranks separated by ';' (\"0-3;4-7\")");
  app.add_flag("--use-logical-cores", o.plan_options.use_logical_cores,
               "give ranks every hardware thread, not one per core");
  app.add_flag("--use-efficiency-cores", o.plan_options.use_efficiency_cores,
               "also use the efficiency cores of a hybrid CPU");
  app.add_flag("--oversubscribe", o.plan_options.oversubscribe, "with --plan: allow more ranks than cores");
  json->excludes(unset, shell);
  show->excludes(unset, plan);
  app.set_version_flag("--version", std::string("nano-init ") + NANO_VERSION);
  app.footer(
      "Examples:\n"
      "  eval \"$(nano-init)\"                     apply the recipe in bash or zsh\n"
      "  nano-init --shell fish | source          apply it in fish\n"
      "  eval \"$(nano-init --unset)\"             undo it\n"
      "  nano-init --explain                      why each variable is set\n"
      "  nano-init -t -r 8                        tcmalloc, 8 OpenMP threads\n"
      "  nano-init --show-topology                packages, NUMA nodes, cores, allowed CPUs\n"
      "  nano-init --show-topology --json         the same as one JSON object, for scripts\n"
      "  nano-init --synthetic \"pack:2 numa:2 core:8 pu:2\" --plan 4\n"
      "                                           plan 4 ranks on a machine you don't have\n"
      "Docs: docs/nano-init.md (in nano's source, installed in share/doc/nano)");
}

nano::Topology load_topology(const InitCommand& o) {
  if (!o.topology_xml.empty()) return nano::load_xml_topology(o.topology_xml, o.allowed_cpus);
  if (!o.synthetic.empty()) return nano::load_synthetic_topology(o.synthetic, o.allowed_cpus);
  nano::Topology t = nano::load_machine_topology();
  if (o.allowed_cpus.empty()) return t;
  // This machine narrowed further, as a cpuset would: keep only the listed CPUs that exist.
  std::vector<int> wanted = nano::parse_cpu_list(o.allowed_cpus);
  for (int cpu : wanted)
    if (!std::binary_search(t.present_pus.begin(), t.present_pus.end(), cpu))
      throw nano::UsageError("--allowed-cpus: CPU " + std::to_string(cpu) + " does not exist on this machine");
  std::vector<nano::Core> kept;
  std::vector<int> allowed;
  for (nano::Core c : t.cores) {
    std::vector<int> pus;
    for (int pu : c.pus)
      if (std::binary_search(wanted.begin(), wanted.end(), pu)) pus.push_back(pu);
    if (pus.empty()) continue;
    c.pus = pus;
    c.logical_index = static_cast<int>(kept.size());
    allowed.insert(allowed.end(), pus.begin(), pus.end());
    kept.push_back(c);
  }
  if (kept.empty()) throw nano::UsageError("--allowed-cpus: none of CPUs " + o.allowed_cpus + " is usable here");
  std::sort(allowed.begin(), allowed.end());
  t.cores = kept;
  t.allowed_pus = allowed;
  return t;
}

// `--show-topology --json`: what describe_topology prints, as one JSON object for scripts.
// CPU sets come as a cpulist string beside their count; NUMA nodes as a count beside their ids.
std::string describe_topology_json(const nano::Topology& topo) {
  std::size_t e_cores = 0;
  for (const nano::Core& c : topo.cores) e_cores += c.efficiency ? 1 : 0;
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (int node : topo.numa_nodes) {
    std::vector<int> pus;
    std::set<int> pkgs;
    int count = 0;
    for (const nano::Core& c : topo.cores) {
      if (c.numa_node != node) continue;
      ++count;
      pkgs.insert(c.package);
      pus.insert(pus.end(), c.pus.begin(), c.pus.end());
    }
    std::sort(pus.begin(), pus.end());
    nodes.push_back({{"node", node},
                     {"packages", std::vector<int>(pkgs.begin(), pkgs.end())},
                     {"cores", count},
                     {"cpus", nano::format_cpu_list(pus)}});
  }
  nlohmann::ordered_json j = {
      {"machine", topo.source},
      {"packages", topo.packages},
      {"numa_nodes", topo.numa_nodes.size()},
      {"numa_node_ids", topo.numa_nodes},
      {"l3_domains", topo.l3_domains},
      {"cores", topo.cores.size()},
      {"smt", topo.smt()},
      {"present_pus", topo.present_pus.size()},
      {"present_cpus", nano::format_cpu_list(topo.present_pus)},
      {"pus", topo.allowed_pus.size()},
      {"allowed_cpus", nano::format_cpu_list(topo.allowed_pus)},
      {"hybrid", topo.hybrid},
      {"performance_cores", topo.cores.size() - e_cores},
      {"efficiency_cores", e_cores},
      {"numa", nodes},
  };
  return j.dump() + "\n";
}

// nano-init's names of the settings: nano-run's flags, but --plan for the rank count.
std::string nano_init_flag(nano::Setting setting) {
  return setting == nano::Setting::kNumProcesses ? "--plan" : nano::command_line_flag(setting);
}

std::string describe_plan(const nano::Plan& plan) {
  std::ostringstream out;
  out << "rank  threads  NUMA  CPUs\n";
  for (const nano::RankPlan& r : plan.ranks) {
    std::ostringstream row;
    row << r.rank;
    out << row.str() << std::string(6 - std::min<std::size_t>(row.str().size(), 5), ' ');
    const std::string threads = std::to_string(r.threads);
    out << threads << std::string(9 - std::min<std::size_t>(threads.size(), 8), ' ');
    const std::string numa = nano::format_cpu_list(r.numa_nodes);
    out << numa << std::string(6 - std::min<std::size_t>(numa.size(), 5), ' ');
    out << nano::format_cpu_list(r.cpus) << '\n';
  }
  for (const std::string& note : plan.notes) out << "note: " << nano::worded_text(note, nano_init_flag) << '\n';
  return out.str();
}

int run_init(const InitCommand& o) {
  // The recipe takes 0 for "not given": an explicit 0 is refused here.
  if (o.threads && *o.threads < 1)
    throw nano::SettingError(nano::Setting::kThreads, std::to_string(*o.threads),
                             "{threads} must be at least 1, got " + std::to_string(*o.threads));
  const nano::Shell shell = nano::parse_shell(o.shell);
  nano::RecipeOptions recipe_options;
  if (!o.allocator.empty()) recipe_options.allocator = nano::parse_allocator(o.allocator);
  if (o.jemalloc) recipe_options.allocator = nano::Allocator::kJemalloc;
  if (o.tcmalloc) recipe_options.allocator = nano::Allocator::kTcmalloc;
  if (o.system_allocator) recipe_options.allocator = nano::Allocator::kSystem;
  recipe_options.openmp = nano::parse_openmp_runtime(o.openmp);
  recipe_options.disable_openmp = o.disable_openmp;
  recipe_options.threads = o.threads.value_or(0);

  const nano::Topology topology = load_topology(o);
  if (o.show_topology) {
    std::cout << (o.json ? describe_topology_json(topology) : nano::describe_topology(topology));
    return 0;
  }
  if (o.plan) {
    nano::PlanOptions plan_options = o.plan_options;
    nano::check_num_processes(*o.plan);
    plan_options.num_processes = *o.plan;
    if (!o.cpu_lists.empty()) plan_options.cpu_for_each_process = nano::parse_cpu_for_each_process(o.cpu_lists);
    std::cout << describe_plan(nano::make_plan(topology, plan_options));
    return 0;
  }
  // The whole machine as one scope: the same cores a single rank would get.
  nano::PlanOptions whole;
  whole.use_logical_cores = o.plan_options.use_logical_cores;
  whole.use_efficiency_cores = o.plan_options.use_efficiency_cores;
  const nano::Plan plan = nano::make_plan(topology, whole);
  const nano::RankPlan& scope = plan.ranks.front();
  const nano::Environment env = nano::current_environment();
  const nano::Recipe recipe =
      nano::make_recipe(scope.threads, scope.cpus, recipe_options, env, nano::find_installed_library);
  for (const std::string& w : recipe.warnings) std::cerr << "nano-init: warning: " << w << '\n';
  if (o.json) {
    std::cout << nano::render_json(recipe);
  } else if (o.unset) {
    std::cout << nano::render_unset(recipe, env, shell);
  } else {
    if (o.explain) {
      std::cout << "# nano-init for " << topology.source << ": " << topology.cores.size()
                << " usable physical cores, CPUs " << nano::format_cpu_list(topology.allowed_pus) << '\n';
      // Span notes matter for ranks, not for one process that owns the whole machine.
      for (const std::string& note : plan.notes)
        if (note.rfind("rank ", 0) != 0) std::cout << "# note: " << nano::worded_text(note, nano_init_flag) << '\n';
    }
    std::cout << nano::render_exports(recipe, shell, o.explain);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nano-init", "nano-init"};
  InitCommand options;
  setup_init(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << '\n';
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "nano-init: " << e.what() << kSeeDocs << '\n';
    return 2;
  }
  // Worded here, once, as nano-run's main words its errors: "nano-init: X" for bad input
  // (exit 2), "nano-init: error: X" when the machine failed us (exit 1).
  try {
    return run_init(options);
  } catch (const nano::UsageError& e) {
    std::cerr << "nano-init: " << nano::worded(e, nano_init_flag) << kSeeDocs << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "nano-init: error: " << e.what() << '\n';
    return 1;
  }
}
