#pragma once
// Where a rank's time goes, recorded for `nano-run --timeline` (TorchNanoOptions::timeline): when
// the launcher sets NANO_TIMELINE (a folder), each rank appends its records to
// FOLDER/rank-R.attempt-A, one write(2) per step; nothing is recorded, and nothing opened,
// otherwise. The launcher merges the files into one trace and a report (launcher/timeline/timeline_merge.h,
// which also parses the format below).
//
// A step ends where nano's DDP ends a synchronising backward. Its phases:
//   data        the sharded loader's next batch: from the sampler's call to the formatted batch
//               (a checkpoint the loader's hook takes meanwhile is not counted here);
//   compute     from nano::DDP's first forward of the step (else the batch, else the step's
//               start) to the gradient exchange's wait: forward, backward, and the exchange that
//               backward overlapped;
//   exchange    blocked at the end of backward on the gradient all-reduces (what overlap did not
//               hide: the exchange, and the wait for slower ranks);
//   checkpoint  a checkpoint's hold of the training loop;
//   other       the rest: the optimizer step, zero_grad, the program's own work.
// Every collective of nano's communicators and of the nano torch backend is recorded as it runs.
//
// Records, one per line, times in nanoseconds of CLOCK_REALTIME (one clock for every rank on a
// host; hosts agree as far as their clocks are synchronised):
//   R RANK HOST CPUS NUMA OMP_NUM_THREADS     once, first: who and where ("-" for unknown)
//   P PHASE START END                         one phase of a detailed step
//   C START END BYTES DESCRIPTION             one collective of a detailed step
//   S STEP START END DATA COMPUTE EXCHANGE CHECKPOINT     a detailed step's totals
//   A FIRST_STEP STEPS START END DATA COMPUTE EXCHANGE CHECKPOINT COLLECTIVES
//                                             after kDetailedSteps, one line per kIntervalSteps
//   T COMPUTING_THREADS CPUS_USED OUTSIDE     a placement sample: threads that used CPU time
//                                             between two looks, the CPUs they ran on last, and
//                                             how many of those lie outside the rank's CPUs
#include <cstddef>
#include <cstdint>
#include <string>

namespace nano::timeline {

/// Steps recorded in full (every phase and collective): a few minutes of a typical run, about
/// 1 MB per rank; after them, one aggregate line per kIntervalSteps steps, so a day-long run's
/// file stays under a few MB.
inline constexpr int64_t kDetailedSteps = 2000;
inline constexpr int64_t kIntervalSteps = 100;

/// Whether this rank records (NANO_TIMELINE is set); decided once.
bool on();

/// The sharded loader starts fetching a batch / hands it out formatted.
void data_begin();
void data_end();
/// nano::DDP's forward takes a training batch: the step's compute starts at its first one (else
/// where its last batch was handed out, else where it started).
void forward_begin();
/// DDP's backward starts waiting for its all-reduces / its synchronising backward ended.
void exchange_begin();
void step_end();
/// A collective was issued (the nano torch backend queued it, or a DDP communication hook handed
/// a gradient bucket to another backend): the step's last one marks where its backward's
/// compute ended.
void collective_issued();
/// torch's DDP (the Python API's ranks, a stock program on torch 2) ended a synchronising
/// backward, and the optimizer starts now: compute ran until the step's last collective was
/// issued, the exchange wait from then until the last one ended (now, where they are not
/// recorded: another backend than nano). With `end_step` the step ends here (the Python API: as
/// nano's DDP, at the backward's end); otherwise the optimizer's step is the step's "other" and
/// step_end() ends it. Without a collective issued in the step, nothing happens and false is
/// returned.
bool exchange_waited(bool end_step);
/// A stock program's optimizer starts its step where no collective was seen (another backend,
/// torch's own hooks for it): the step's compute (data, forward, backward with its exchange) ends here.
void optimizer_begin();
/// A checkpoint held the loop from `start` to now (timeline clock, now_ns()).
void checkpoint_since(int64_t start);
/// One collective ran from `start` to now.
void collective_since(int64_t start, std::size_t bytes, const std::string& description);
/// The timeline's clock (0 when the timeline is off, so callers may skip the system call).
int64_t now_ns();
/// Writes the records held back, as the exit handler does: for a process that ends without exit
/// handlers (a planned stop at a checkpoint, runtime/checkpoint_files/checkpoint_stop.h). Nothing when off.
void flush();

}  // namespace nano::timeline
