#pragma once
// A tqdm-style progress display for rank 0: pure formatting functions plus a thin printer.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace nano::examples {

/// Where an epoch stands; everything the display needs.
struct ProgressState {
  int epoch = 1;  ///< 1-based
  int epochs = 1;
  int64_t done = 0;         ///< batches finished this epoch
  int64_t total = 0;        ///< batches this epoch
  int64_t images = 0;       ///< images finished this epoch
  double elapsed_s = 0;     ///< seconds since the epoch started
  double running_loss = 0;  ///< mean loss of the batches so far
  /// Batches an interrupted run had done before this one resumed the epoch: counted in `done`,
  /// not in the rate or the eta (images, elapsed_s and running_loss are this run's).
  int64_t resumed = 0;
};

/// "mm:ss" below an hour, "h:mm:ss" from an hour on (tqdm's style); negative or
/// non-finite values give "?".
std::string format_duration(double seconds);

/// Images per second with one decimal ("1234.5 img/s"); "? img/s" before any time passed.
std::string format_rate(int64_t images, double seconds);

/// Seconds left at the current batch rate; negative when unknown (nothing done yet).
double eta_seconds(int64_t done, int64_t total, double elapsed_s);

/// The terminal bar, redrawn in place:
/// "epoch 1/3  45%|#########           | 420/938 [00:12<00:15, 2345.6 img/s, loss 0.4321]"
/// `width` is the number of cells inside the bars.
std::string format_bar(const ProgressState& s, int width = 20);

/// The plain line for logs (stdout not a terminal):
/// "epoch 1/3 batch 420/938 (45%) 2345.6 img/s elapsed 00:12 eta 00:15 loss 0.4321"
std::string format_line(const ProgressState& s);

/// Decides whether a plain line is due: at the last batch, whenever `done` crosses the next
/// tenth of `total`, or when `interval_s` passed since the last line. `last_done` and
/// `last_print_s` describe the previous line (0 and 0 before the first).
bool plain_line_due(int64_t done, int64_t total, int64_t last_done, double elapsed_s, double last_print_s,
                    double interval_s = 30.0);

/// Prints the progress of one epoch to a FILE: a bar redrawn in place (at most every 0.1 s)
/// when the stream is a terminal, otherwise plain lines when plain_line_due says so.
/// Disabled printers (ranks other than 0) print nothing.
class ProgressPrinter {
 public:
  /// `tty` < 0 asks isatty() on `out`; 0 / 1 force plain lines / the bar.
  ProgressPrinter(std::FILE* out, int epoch, int epochs, int64_t total_batches, bool enabled = true, int tty = -1);
  /// The epoch continues a resumed one after `batches` done before (0: it does not). Call before
  /// the first update(); prints once "epoch 1/3: resumed after batch 60/150".
  void resume_after(int64_t batches);
  /// Records that `batches` more batches with `images` images and mean loss `loss` finished.
  void update(int64_t batches, int64_t images, double loss);
  /// Draws the final state (ends the bar's line).
  void finish();
  const ProgressState& state() const { return state_; }

 private:
  void draw(bool final);
  std::FILE* out_;
  bool enabled_;
  bool tty_;
  ProgressState state_;
  double loss_sum_ = 0;
  std::chrono::steady_clock::time_point start_;
  double last_draw_s_ = -1;
  int64_t last_line_done_ = 0;
  double last_line_s_ = 0;
};

}  // namespace nano::examples
