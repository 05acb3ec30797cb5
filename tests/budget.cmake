# The test budget: what each ctest entry costs and where it runs (docs/developing.md, "The test
# budget", says why each heavy and medium one is the size it is).
#
# Cost labels, from the wall time of the entry in a whole run of scripts/test.sh on the 2-core
# development VM (two tests at a time, one multi-host case beside them):
#   quick    under about 10 s   (scripts/test.sh -L quick: the subset to run while working)
#   medium   about 10 to 60 s
#   heavy    over about 60 s
# Every entry not named below is quick. A test that grows past its label is a finding for the
# next change (scripts/test.sh prints the slowest), not a failure.
#
# Legs: every entry runs on the Debian 12 leg (scripts/test.sh); the Debian 13 leg
# (scripts/test-debian13.sh) runs all but those labelled one-leg: cases whose code path does not
# depend on the platform (nano's own launcher logic, the shell of the test bed) or that repeat on
# Debian 13 what a cheaper case there already covers. Names are exact ctest names.

set(NANO_TESTS_HEAVY
  examples.fashion_mnist_nano.precision
  examples.fashion_mnist_nano.soak
  faults.ranks
  docs.commands
  multihost.fashion
  multihost.soak
  multihost.strangers
  multihost.torch_backend
  multihost.train
  python.api.pip_venv
  python.torch_suite
  runtime.communicators.processes
)

set(NANO_TESTS_MEDIUM
  bench.args
  build.targets_alone
  cli.nano_run
  cli.nano_run.listeners
  examples.fashion_mnist_decorator.checkpoint_restart
  examples.fashion_mnist_nano.checkpoint_owner
  examples.fashion_mnist_nano.checkpoint_restart
  examples.fashion_mnist_single.smoke
  examples.resnet18_cifar.resume
  fuzz.build
  fuzz.checkpoint_header
  fuzz.frames
  fuzz.hostfile
  fuzz.store_wire
  fuzz.timeline
  install.find_package
  multihost.elastic_rejoin
  multihost.elastic_shrink
  multihost.elastic_slow
  multihost.env2
  multihost.interrupt
  multihost.link_cut
  multihost.python_api
  multihost.python_elastic
  multihost.python_rejoin
  multihost.rank_killed
  multihost.slurm
  multihost.timeline
  python.api.decorated
  python.api.examples
  python.api.faults
  python.api.notebook
  python.api.options
  python.api.resume
  python.api.shared_tensors
  python.bigdl.port
  python.bigdl.tutorials
  python.lite.auto_lr
  python.lite.use_ipex
  python.torch_backend.collectives_3
  python.torch_backend.ddp_3_4_ranks
  python.torch_backend.ddp_comm_hooks
  python.torch_backend.ddp_join
  python.torch_backend.leaver
  python.torch_backend.mismatch
  python.torch_backend.mismatch_gloo_path
  python.torch_backend.monitored_barrier
  python.torch_backend.rendezvous_bound
  runtime.training.auto_checkpoint.decorator_resumes_exactly_mpi
  runtime.training.auto_checkpoint.decorator_resumes_exactly_subprocess
  runtime.training.auto_checkpoint.other_precision_refused
  runtime.training.auto_checkpoint.resumes_exactly_precision_bf16
  runtime.training.auto_checkpoint.torch_nano_resumes_exactly_mpi
  runtime.training.auto_checkpoint.torch_nano_resumes_exactly_subprocess
  runtime.training.ddp.processes
  runtime.decorator.no_model_is_a_compile_error
  launcher.tune.choice
  launcher.tune.examples
  launcher.tune.torch_backend
  runtime.folder_claim.unit
  runtime.training.unit
  launcher.timeline.python_api
)

# Debian 12 only, each for the reason beside it (docs/developing.md, "The two legs").
set(NANO_TESTS_ONE_LEG
  # Long soaks: sized by their faults, whose code paths the fault suite runs on both legs.
  examples.fashion_mnist_nano.soak
  multihost.soak
  # The convergence test: its bound is measured on Debian 12; Debian 13's autocast and
  # precision paths run in runtime.torch_nano.precision_* and runtime.decorator.precision_*.
  examples.fashion_mnist_nano.precision
  # The docs' commands are the same on both platforms.
  docs.commands
  # The benchmarks' argument checks: scripts, no platform code. The tree's layout: its files.
  bench.args build.layout
  # Launcher logic without a platform path: tuning (a scripted trainer; its stock-PyTorch and
  # examples cases time what runs on both legs elsewhere), the timeline's merging and report,
  # the checkpoint folder's claim (torch-free).
  launcher.tune.choice launcher.tune.tie launcher.tune.failing launcher.tune.metric launcher.tune.store
  launcher.tune.inputs launcher.tune.interrupt launcher.tune.examples launcher.tune.torch_backend
  launcher.timeline.straggler launcher.timeline.phases launcher.timeline.torch_nano launcher.timeline.restart launcher.timeline.interrupt
  launcher.timeline.unwritable launcher.timeline.report
  examples.fashion_mnist_nano.checkpoint_owner
  # A second of a kind whose first runs on both legs: the decorator's checkpoint restart (the
  # TorchNano one runs there), the mpi backend's exact resumes (the fault suite restarts on mpi
  # there), float64's exact resume (bf16's runs there).
  examples.fashion_mnist_decorator.checkpoint_restart
  runtime.training.auto_checkpoint.torch_nano_resumes_exactly_mpi
  runtime.training.auto_checkpoint.decorator_resumes_exactly_mpi
  runtime.training.auto_checkpoint.resumes_exactly_precision_64
  # Several hosts: env3 (3 hosts: the same launch as env2), the accuracy on 2 hosts (the
  # hierarchical sums run in multihost.train there), a busy port (the launcher's check), a rank
  # killed (the fault suite and the lost host and cut link run there), the timeline's shipping.
  multihost.env3 multihost.fashion multihost.busy_port multihost.rank_killed multihost.timeline
  # BigDL-Nano's tutorials: what they use of nano_torch (use_ipex, bf16, channels_last, @nano, 2
  # ranks) runs on both legs in python.lite.* and python.bigdl.port; they add torchvision's
  # datasets and models, and 80 s on Debian 13.
  python.bigdl.tutorials
)

# nano_test_budget_labels(TEST OUT): the labels of TEST into OUT; remembers that TEST exists.
function(nano_test_budget_labels test out)
  set_property(GLOBAL APPEND PROPERTY NANO_TESTS_SEEN ${test})
  if(test IN_LIST NANO_TESTS_HEAVY)
    set(labels heavy)
  elseif(test IN_LIST NANO_TESTS_MEDIUM)
    set(labels medium)
  else()
    set(labels quick)
  endif()
  if(test IN_LIST NANO_TESTS_ONE_LEG)
    list(APPEND labels one-leg)
  endif()
  set(${out} "${labels}" PARENT_SCOPE)
endfunction()

# nano_test_budget_check(): where every test is configured (the runtime, the examples and the
# torch backend built), every name of the lists above must be a test.
function(nano_test_budget_check)
  if(NOT (NANO_BUILD_RUNTIME AND NANO_BUILD_EXAMPLES AND TARGET nano_torch_ext))
    return()
  endif()
  get_property(seen GLOBAL PROPERTY NANO_TESTS_SEEN)
  foreach(test IN LISTS NANO_TESTS_HEAVY NANO_TESTS_MEDIUM NANO_TESTS_ONE_LEG)
    if(NOT test IN_LIST seen)
      message(FATAL_ERROR "tests/budget.cmake names ${test}, which no folder defines")
    endif()
  endforeach()
endfunction()
