#include "examples/common/progress.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace nano::examples;

TEST_CASE("format_duration") {
  const std::pair<double, const char*> rows[] = {
      {0, "00:00"},    {5.9, "00:05"},      {61, "01:01"},
      {3599, "59:59"}, {3600, "1:00:00"},   {3723, "1:02:03"},
      {-1, "?"},       {std::nan(""), "?"}, {std::numeric_limits<double>::infinity(), "?"}};
  for (const auto& [s, text] : rows) {
    CAPTURE(s);
    CHECK(format_duration(s) == text);
  }
}

TEST_CASE("format_rate and eta_seconds") {
  CHECK(format_rate(6400, 2.0) == "3200.0 img/s");
  CHECK(format_rate(100, 3.0) == "33.3 img/s");
  CHECK(format_rate(100, 0.0) == "? img/s");
  CHECK(eta_seconds(0, 10, 5) < 0);
  CHECK(eta_seconds(5, 10, 5) == doctest::Approx(5));
  CHECK(eta_seconds(10, 10, 5) == doctest::Approx(0));
  CHECK(eta_seconds(1, 938, 0.5) == doctest::Approx(468.5));
}

TEST_CASE("format_bar and format_line") {
  struct Row {
    ProgressState s;
    const char* bar;
    const char* line;
  };
  const Row rows[] = {
      {{1, 3, 0, 938, 0, 0.0, 0.0},
       "epoch 1/3   0%|                    | 0/938 [00:00<?, ? img/s, loss 0.0000]",
       "epoch 1/3 batch 0/938 (0%) ? img/s elapsed 00:00 eta ? loss 0.0000"},
      {{1, 3, 469, 938, 469 * 64, 12.0, 0.43214},
       "epoch 1/3  50%|##########          | 469/938 [00:12<00:12, 2501.3 img/s, loss 0.4321]",
       "epoch 1/3 batch 469/938 (50%) 2501.3 img/s elapsed 00:12 eta 00:12 loss 0.4321"},
      {{3, 3, 938, 938, 60000, 25.0, 0.25},
       "epoch 3/3 100%|####################| 938/938 [00:25<00:00, 2400.0 img/s, loss 0.2500]",
       "epoch 3/3 batch 938/938 (100%) 2400.0 img/s elapsed 00:25 eta 00:00 loss 0.2500"},
      {{2, 10, 1, 3, 64, 4000.0, 2.5},
       "epoch 2/10  33%|######              | 1/3 [1:06:40<2:13:20, 0.0 img/s, loss 2.5000]",
       "epoch 2/10 batch 1/3 (33%) 0.0 img/s elapsed 1:06:40 eta 2:13:20 loss 2.5000"},
  };
  for (const Row& r : rows) {
    CHECK(format_bar(r.s) == r.bar);
    CHECK(format_line(r.s) == r.line);
  }
  CHECK(format_bar({1, 1, 1, 2, 64, 1.0, 1.0}, 4) == "epoch 1/1  50%|##  | 1/2 [00:01<00:01, 64.0 img/s, loss 1.0000]");
}

TEST_CASE("plain_line_due: every tenth, the last batch, or after the interval") {
  struct Row {
    int64_t done, total, last_done;
    double elapsed, last_print;
    bool due;
  };
  const Row rows[] = {
      {1, 938, 0, 0.1, 0, false},      // nothing crossed yet
      {93, 938, 0, 1, 0, false},       // 9.9%
      {94, 938, 0, 1, 0, true},        // crosses 10%
      {95, 938, 94, 1.1, 1, false},    // same tenth as the last line
      {188, 938, 94, 2, 1, true},      // crosses 20%
      {938, 938, 900, 20, 19, true},   // the last batch always
      {938, 938, 938, 20, 20, false},  // already printed
      {100, 938, 94, 40, 5, true},     // 35 s since the last line
      {100, 938, 94, 34, 5, false},    // 29 s
      {3, 5, 2, 1, 0, true},           // small epochs: each batch crosses a tenth
  };
  for (const Row& r : rows) {
    CAPTURE(r.done);
    CAPTURE(r.elapsed);
    CHECK(plain_line_due(r.done, r.total, r.last_done, r.elapsed, r.last_print) == r.due);
  }
}

TEST_CASE("ProgressPrinter writes plain lines to a non-terminal and nothing when disabled") {
  std::FILE* f = std::tmpfile();
  {
    ProgressPrinter p(f, 1, 2, 20, true, /*tty=*/0);
    for (int i = 0; i < 20; ++i) p.update(1, 64, 1.0);
    p.finish();
    ProgressPrinter off(f, 1, 2, 20, false, 0);
    off.update(20, 1280, 1.0);
    off.finish();
  }
  std::rewind(f);
  int lines = 0;
  char buf[512];
  std::string last;
  while (std::fgets(buf, sizeof buf, f)) {
    ++lines;
    last = buf;
  }
  std::fclose(f);
  CHECK(lines == 10);  // one per tenth of 20 batches, none from the disabled printer
  CHECK(last.rfind("epoch 1/2 batch 20/20 (100%) ", 0) == 0);
  CHECK(last.find("loss 1.0000") != std::string::npos);
}

TEST_CASE("a resumed epoch counts on from where it was; the rate and eta are this run's") {
  // 60 of 150 batches were done before; this run did 30 more in 12 s: 60 left at that pace.
  const ProgressState s{1, 3, 90, 150, 30 * 64, 12.0, 0.5, 60};
  CHECK(format_line(s) == "epoch 1/3 batch 90/150 (60%) 160.0 img/s elapsed 00:12 eta 00:24 loss 0.5000");
  CHECK(format_bar(s) == "epoch 1/3  60%|############        | 90/150 [00:12<00:24, 160.0 img/s, loss 0.5000]");

  std::FILE* f = std::tmpfile();
  {
    ProgressPrinter p(f, 2, 3, 20, true, /*tty=*/0);
    p.resume_after(12);
    for (int i = 0; i < 8; ++i) p.update(1, 64, 2.0);
    p.finish();
    CHECK(p.state().done == 20);
    CHECK(p.state().running_loss == 2.0);  // the mean of this run's batches
  }
  std::rewind(f);
  std::vector<std::string> lines;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) lines.emplace_back(buf);
  std::fclose(f);
  REQUIRE(lines.size() == 5);  // the resume, then 14, 16, 18 and 20 of 20
  CHECK(lines[0] == "epoch 2/3: resumed after batch 12/20\n");
  CHECK(lines[1].rfind("epoch 2/3 batch 14/20 (70%) ", 0) == 0);
  CHECK(lines[4].rfind("epoch 2/3 batch 20/20 (100%) ", 0) == 0);
}
