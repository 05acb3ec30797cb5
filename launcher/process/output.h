#pragma once
// Rank output: bytes from each rank's stdout/stderr become whole, tagged lines ("[rank 3] ..."),
// never two ranks mixed inside one line; optional per-rank log files; the last stderr lines
// of every rank are kept for the failure summary. A line a rank redraws with carriage returns
// (a tqdm progress bar) moves live on the terminal: each redraw is shown as it comes, in place;
// logs and the stderr tail keep only its final state.
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "launcher/process/pending_writer.h"

namespace nano {

enum class Stream { kOut, kErr };

/// Where finished lines go. The real one writes each line with a single write(2).
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void write(Stream stream, const std::string& line) = 0;
};

/// Writes to file descriptors 1 and 2 without ever blocking (launcher/process/pending_writer.h): the
/// supervision loop polls pollfds() and calls flush_ready(); drain() at the end.
class StdioSink : public OutputSink {
 public:
  void write(Stream stream, const std::string& line) override;
  /// POLLOUT entries for the streams with bytes waiting.
  std::vector<struct pollfd> pollfds() const;
  void flush_ready();
  /// Writes what is left for at most `limit`; returns a note about output the terminal did
  /// not get ("" when none was lost).
  std::string drain(std::chrono::milliseconds limit);

 private:
  PendingWriter out_{1}, err_{2};
};

struct OutputConfig {
  bool tag = true;              ///< prefix "[rank N] "
  std::vector<int> show_ranks;  ///< ranks whose lines reach the terminal; empty = all
  std::string log_dir;          ///< "" = no files; else rank-N.log per rank and summary.log
  bool terminal = true;         ///< false: lines and notes go to the log files only
  size_t tail_lines = 20;       ///< stderr lines kept per rank
  /// Added to rank numbers in tags and log names: this launcher runs ranks offset..offset+N-1
  /// of a larger world (one node's part under srun). show_ranks counts from 0 here.
  int rank_offset = 0;
};

/// The launcher's own rank for lines of mpirun itself.
constexpr int kMpirunStream = -1;

class OutputRouter {
 public:
  /// Creates `config.log_dir` (and its files) when set; throws UsageError when it cannot.
  OutputRouter(int world_size, OutputConfig config, OutputSink& sink);

  /// Appends bytes a rank wrote; complete lines are emitted at once, the rest is kept.
  /// Lines pass whole up to 256 MiB (longer ones, binary output without newlines, are emitted
  /// in 256 MiB pieces). `rank` may be kMpirunStream. A line is what follows its last '\r'
  /// (a trailing "\r\n" ends it as "\n" does); while a line is unfinished, its text after the
  /// latest '\r' is drawn on the terminal as "\r[rank N] text", without a newline, until the line
  /// ends (drawn once more, in place, with its newline) or other output comes (which first ends
  /// the drawn line with a newline).
  void feed(int rank, Stream stream, const char* data, size_t size);
  /// Emits what is left of an unterminated last line (at end of stream).
  void finish(int rank, Stream stream);
  /// The last stderr lines of `rank` (at most `tail_lines`), oldest first, without tags.
  std::vector<std::string> stderr_tail(int rank) const;
  /// A line from nano-run itself: to stderr, untagged, and into summary.log.
  void note(const std::string& line);
  /// From now on `rank`'s lines go to its log file only, not to the terminal.
  void hide(int rank);
  /// A new attempt of the same world (a restart): the rank and mpirun logs are written to
  /// log_dir/`name`/ from now on (summary.log stays, telling every attempt), and what was kept
  /// of the previous attempt (partial lines, stderr tails, hidden streams) is dropped. Throws
  /// UsageError when the folder cannot be made.
  void start_attempt(const std::string& name);

 private:
  // One --log-dir file: made 0600, never through a link someone put at its name.
  class LogFile {
   public:
    explicit LogFile(int fd) : fd_(fd) {}
    ~LogFile();
    LogFile(const LogFile&) = delete;
    LogFile& operator=(const LogFile&) = delete;
    void line(const std::string& text);

   private:
    int fd_;
  };
  struct RankState {
    std::string pending[2];
    std::deque<std::string> tail;
    std::unique_ptr<LogFile> log;
    bool hidden = false;
  };
  RankState& state(int rank);
  static std::unique_ptr<LogFile> open_log(const std::string& dir, const std::string& name);
  void open_logs(const std::string& dir);
  void emit(int rank, Stream stream, const std::string& line);
  bool shown(int rank);
  std::string tag(int rank) const;
  // Draws `rank`'s unfinished line's latest state in place; ends another rank's drawn line first.
  void redraw(int rank, Stream stream, const std::string& text);
  // Ends the line drawn in place, if any, with a newline.
  void end_drawn_line();

  // The unfinished line drawn on the terminal without its newline, if any.
  struct Drawn {
    bool open = false;
    int rank = 0;
    Stream stream = Stream::kOut;
  };

  OutputConfig config_;
  OutputSink& sink_;
  std::vector<RankState> ranks_;  // index rank+1: slot 0 is mpirun's own output
  std::unique_ptr<LogFile> summary_;
  Drawn drawn_;
};

}  // namespace nano
