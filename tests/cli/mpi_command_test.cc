#include "cli/mpi_command.h"

#include <doctest/doctest.h>

using namespace nano;

TEST_CASE("mpirun command for two hosts") {
  MpiCommandInput in;
  in.mpirun = "/usr/bin/mpirun";
  in.num_processes = 8;
  in.hosts = {{"node1", 4}, {"node2", 4}};
  in.as_root = true;
  in.shim = {"/opt/nano/bin/nano-run", "--nano-rank-shim", "--master-addr", "node1", "--nano-env", "NANO_X=1 2"};
  in.program = {"./train", "--epochs", "3"};
  std::vector<std::string> expected = {"/usr/bin/mpirun",
                                       "-np",
                                       "8",
                                       "--bind-to",
                                       "none",
                                       "--map-by",
                                       "slot",
                                       "--allow-run-as-root",
                                       "--host",
                                       "node1:4,node2:4",
                                       "/opt/nano/bin/nano-run",
                                       "--nano-rank-shim",
                                       "--master-addr",
                                       "node1",
                                       "--nano-env",
                                       "NANO_X=1 2",
                                       "--",
                                       "./train",
                                       "--epochs",
                                       "3"};
  CHECK(make_mpi_command(in) == expected);
  CHECK(shell_join(make_mpi_command(in)) ==
        "/usr/bin/mpirun -np 8 --bind-to none --map-by slot --allow-run-as-root --host "
        "node1:4,node2:4 /opt/nano/bin/nano-run --nano-rank-shim "
        "--master-addr node1 --nano-env 'NANO_X=1 2' -- ./train --epochs 3");
}

TEST_CASE("mpirun command for this machine, not root") {
  MpiCommandInput in;
  in.num_processes = 2;
  in.shim = {"nano-run", "--nano-rank-shim"};
  in.program = {"/bin/true"};
  std::vector<std::string> expected = {
      "mpirun",           "-np", "2",        "--bind-to", "none", "--map-by", "slot", "--oversubscribe", "nano-run",
      "--nano-rank-shim", "--",  "/bin/true"};
  CHECK(make_mpi_command(in) == expected);
}

TEST_CASE("shell_join quotes what a shell would split") {
  CHECK(shell_join({"a", "b c", "it's", ""}) == "a 'b c' 'it'\\''s' ''");
}
