#include "launcher/mpi/mpi_command.h"

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

TEST_CASE("one-host Open MPI settings: the job's files in its folder, nothing on the network, the user's own kept") {
  nano::Environment env = {{"OMPI_MCA_pml", "ucx"}};  // the user's choice stays
  nano::add_one_host_open_mpi_settings("/dev/shm/nano-j1", env);
  CHECK(env.at("OMPI_MCA_pml") == "ucx");
  CHECK(env.at("OMPI_MCA_btl") == "^tcp,ofi");
  CHECK(env.at("OMPI_MCA_oob_tcp_if_include") == "lo");
  CHECK(env.at("OMPI_MCA_orte_tmpdir_base") == "/dev/shm/nano-j1");
  CHECK(env.at("PRTE_MCA_prte_tmpdir_base") == "/dev/shm/nano-j1");
  CHECK(env.at("OMPI_MCA_btl_vader_backing_directory") == "/dev/shm/nano-j1");
  nano::Environment several_hosts;
  nano::add_one_host_open_mpi_settings("", several_hosts);  // no job folder: a multi-host job
  CHECK(several_hosts.empty());
}

TEST_CASE("a rank's Open MPI settings: its own segments in its own folder, unless already placed") {
  nano::Environment env = {{"OMPI_MCA_btl_vader_backing_directory", "/dev/shm/nano-j1"}};  // a one-host job's
  nano::add_rank_open_mpi_settings("/dev/shm/nano-j1-rank-2", env);
  CHECK(env.at("OMPI_MCA_btl_vader_backing_directory") == "/dev/shm/nano-j1");
  CHECK(env.at("OMPI_MCA_btl_sm_backing_directory") == "/dev/shm/nano-j1-rank-2");
  CHECK(env.at("OMPI_MCA_osc_sm_backing_directory") == "/dev/shm/nano-j1-rank-2");
  nano::Environment none;
  nano::add_rank_open_mpi_settings("", none);  // no folder (no job id): nothing
  CHECK(none.empty());
}
