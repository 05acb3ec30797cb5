#include "launcher/prepare/torchrun_env.h"

#include <doctest/doctest.h>

using namespace nano;

TEST_CASE("the attempt's variables: torchrun's agent-level ones, per rank") {
  const AttemptIdentity first{"4242-a1b2c3", "4242-a1b2c3", 0, 2};
  CHECK(attempt_variables(first, 3) ==
        Environment{{"NANO_JOB_ID", "4242-a1b2c3"},
                    {"NANO_RESTART_COUNT", "0"},
                    {"TORCHELASTIC_RESTART_COUNT", "0"},
                    {"TORCHELASTIC_MAX_RESTARTS", "2"},
                    {"TORCHELASTIC_RUN_ID", "4242-a1b2c3"},
                    {"TORCHELASTIC_ERROR_FILE", "/dev/shm/nano-4242-a1b2c3-rank-3/error.json"}});
  // A restart: a fresh job (its own files), the same run.
  const AttemptIdentity second{"4242-d4e5f6", "4242-a1b2c3", 1, 2};
  const Environment again = attempt_variables(second, 0);
  CHECK(again.at("NANO_RESTART_COUNT") == "1");
  CHECK(again.at("TORCHELASTIC_RESTART_COUNT") == "1");
  CHECK(again.at("TORCHELASTIC_RUN_ID") == "4242-a1b2c3");
  CHECK(again.at("TORCHELASTIC_ERROR_FILE") == "/dev/shm/nano-4242-d4e5f6-rank-0/error.json");
  CHECK(rank_files_dir(second, 0) == "/dev/shm/nano-4242-d4e5f6-rank-0");
  // A one-host job's: inside its private folder.
  AttemptIdentity one_host = second;
  one_host.job_dir = "/dev/shm/nano-4242-d4e5f6";
  CHECK(attempt_variables(one_host, 2).at("TORCHELASTIC_ERROR_FILE") == "/dev/shm/nano-4242-d4e5f6/rank-2/error.json");
  // A dry run has no attempt.
  CHECK(attempt_variables(AttemptIdentity{}, 0).empty());
}

TEST_CASE("the agent's variables never reach a rank; one warning names them") {
  struct Case {
    const char* name;
    Environment env;
    Environment left;
    std::vector<std::string> dropped;
    std::string warning;
  };
  const std::string why =
      " to the ranks: nano-run runs no torchelastic agent, so nothing would serve what it points at (its store, its "
      "watchdog)";
  const Case cases[] = {
      {"nothing of the agent's",
       {{"PATH", "/bin"}, {"TORCHELASTIC_RUN_ID", "x"}},
       {{"PATH", "/bin"}, {"TORCHELASTIC_RUN_ID", "x"}},
       {},
       ""},
      {"the agent's store",
       {{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"PATH", "/bin"}},
       {{"PATH", "/bin"}},
       {"TORCHELASTIC_USE_AGENT_STORE"},
       "not passing TORCHELASTIC_USE_AGENT_STORE=True" + why},
      {"also when False: nano-run says nothing of an agent",
       {{"TORCHELASTIC_USE_AGENT_STORE", "False"}},
       {},
       {"TORCHELASTIC_USE_AGENT_STORE"},
       "not passing TORCHELASTIC_USE_AGENT_STORE=False" + why},
      {"the agent's watchdog and its pipe",
       {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"TORCHELASTIC_TIMER_FILE", "/tmp/w"}},
       {},
       {"TORCHELASTIC_ENABLE_FILE_TIMER", "TORCHELASTIC_TIMER_FILE"},
       "not passing TORCHELASTIC_ENABLE_FILE_TIMER=1, TORCHELASTIC_TIMER_FILE=/tmp/w" + why},
      {"a timer file of the user's own server stays",
       {{"TORCHELASTIC_TIMER_FILE", "/tmp/mine"}},
       {{"TORCHELASTIC_TIMER_FILE", "/tmp/mine"}},
       {},
       ""},
      {"all of them",
       {{"TORCHELASTIC_USE_AGENT_STORE", "True"},
        {"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
        {"TORCHELASTIC_TIMER_FILE", "/tmp/w"}},
       {},
       {"TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ENABLE_FILE_TIMER", "TORCHELASTIC_TIMER_FILE"},
       "not passing TORCHELASTIC_USE_AGENT_STORE=True, TORCHELASTIC_ENABLE_FILE_TIMER=1, "
       "TORCHELASTIC_TIMER_FILE=/tmp/w" +
           why},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    Environment env = c.env;
    const DroppedVariables d = drop_agent_variables(env);
    CHECK(env == c.left);
    CHECK(d.names == c.dropped);
    CHECK(d.warning == c.warning);
  }
}

TEST_CASE("torch's error file: the exception and its innermost frame") {
  struct Case {
    const char* name;
    std::string text;
    bool parses;
    std::string message;
    std::string where;
  };
  const Case cases[] = {
      {"record's form, a chained exception: the last traceback's innermost frame",
       R"({"message": {"message": "RuntimeError: boom\nsecond line", "extraInfo": {"py_callstack": )"
       R"("Traceback (most recent call last):\n  File \"/tmp/rec.py\", line 9, in main\n    int(\"x\")\n)"
       R"(ValueError: invalid literal\n\nDuring handling of the above exception, another exception occurred:\n\n)"
       R"(Traceback (most recent call last):\n  File \"/tmp/rec.py\", line 11, in main\n    helper()\n)"
       R"(  File \"/tmp/rec.py\", line 4, in helper\n    raise RuntimeError(\"boom\\nsecond line\")\n)"
       R"(RuntimeError: boom\nsecond line\n", "timestamp": "1796159026"}}})",
       true, "RuntimeError: boom\nsecond line", "/tmp/rec.py:4 in helper"},
      {"a path with a comma and spaces",
       R"({"message": {"message": "KeyError: 'x'", "extraInfo": {"py_callstack": )"
       R"("Traceback (most recent call last):\n  File \"/my dir/a, b.py\", line 2, in <module>\nKeyError: 'x'\n"}}})",
       true, "KeyError: 'x'", "/my dir/a, b.py:2 in <module>"},
      {"no traceback", R"({"message": {"message": "E: x"}})", true, "E: x", ""},
      {"the plain form", R"({"message": "E: y", "timestamp": 3})", true, "E: y", ""},
      {"not JSON", "{\"message\": ", false, "", ""},
      {"JSON, not torch's", R"({"error": "x"})", false, "", ""},
      {"a message of another type", R"({"message": {"message": 5}})", false, "", ""},
      {"an array", "[1, 2]", false, "", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto raised = parse_error_file(c.text);
    REQUIRE(raised.has_value() == c.parses);
    if (!raised) continue;
    CHECK(raised->message == c.message);
    CHECK(raised->where == c.where);
  }
}
