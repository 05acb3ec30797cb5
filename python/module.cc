// nano_torch._C: the creator that torch.distributed.Backend.register_backend calls for "nano"
// (nano_torch/__init__.py registers it), a probe of the path a group took, and the Python
// API's launch (launch.h).
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>  // c10::intrusive_ptr as a holder, shared with torch's bindings

#include <chrono>

#include <nano/error.h>
#include "core/setting_list.h"
#ifndef NANO_TORCH_WITHOUT_LAUNCH  // the build for a pip torch alone (bench/python/build_nano_torch.py)
#include "python/launch.h"
#endif
#include "python/backend_executors.h"
#include "python/torch_backend.h"
#include "runtime/checkpoint_files/checkpoint_folder.h"
#include "runtime/checkpoint_files/checkpoint_stop.h"
#include "runtime/folder_claim/folder_claim.h"
#include "runtime/rendezvous/rendezvous.h"
#include "runtime/timeline/recorder.h"

namespace py = pybind11;

namespace {

// The backend's inner Gloo group, made as a Python program makes one: through torch's binding
// of ProcessGroupGloo, whose C++ header needs Gloo's headers (absent from torch's pip wheels).
c10::intrusive_ptr<nano::TorchBackendBase> gloo_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                      std::chrono::milliseconds timeout,
                                                      const nano::GlooBinding& where) {
  py::gil_scoped_acquire gil;  // the creator runs without it (the rendezvous waits)
  try {
    py::object gloo = py::module_::import("torch.distributed").attr("ProcessGroupGloo");
    py::object device = where.interface.empty() ? gloo.attr("create_device")(py::arg("hostname") = where.hostname)
                                                : gloo.attr("create_device")(py::arg("interface") = where.interface);
    py::object options = gloo.attr("_Options")();
    options.attr("_devices") = py::make_tuple(device);
    options.attr("_timeout") = timeout;
    options.attr("_threads") = 2;
    return gloo(store, rank, size, options).cast<c10::intrusive_ptr<nano::TorchBackendBase>>();
  } catch (const py::error_already_set& e) {
    throw nano::Error(e.what());  // while the GIL is held: the Python error is released here
  }
}

// The timeline's events that Python sees (nano_torch/_timeline.py): the Python API's loaders,
// forwards, optimizer steps and (on other backends than nano) DDP buckets, and a stock program's
// optimizer steps (runtime/timeline/recorder.h).
void bind_timeline(py::module_& m) {
  namespace t = nano::timeline;
  m.def("_timeline_on", &t::on, "Whether this rank records a timeline (NANO_TIMELINE is set).");
  m.def("_timeline_data_begin", &t::data_begin);
  m.def("_timeline_data_end", &t::data_end);
  m.def("_timeline_forward_begin", &t::forward_begin);
  m.def("_timeline_collective_issued", &t::collective_issued);
  m.def("_timeline_exchange_waited", &t::exchange_waited, py::arg("end_step"));
  m.def("_timeline_optimizer_begin", &t::optimizer_begin);
  m.def("_timeline_step_end", &t::step_end);
}

// One live owner per checkpoint folder, the C++ API's claim (runtime/folder_claim/folder_claim.h): the Python
// API's caller holds it for its launch, and rank 0 checks it before every write and prune.
void bind_folder_claim(py::module_& m) {
  py::class_<nano::FolderClaim>(
      m, "FolderClaim", "The claim of one checkpoint folder for this job (runtime/folder_claim/folder_claim.h).")
      .def(py::init<const std::string&>(), py::arg("dir"), py::call_guard<py::gil_scoped_release>(),
           "Claims `dir` for this job; RuntimeError naming the holder when another job's claim is live.")
      .def("holds", &nano::FolderClaim::holds, "Whether this process holds the claim file itself.")
      .def("check", &nano::FolderClaim::check, py::call_guard<py::gil_scoped_release>(),
           "RuntimeError naming the folder once its live claim is no longer this job's.");
  m.def("checkpoint_job_id", &nano::checkpoint_job_id, "This process's job identity for folder claims.");
}

// A checkpoint's payload for torch.load, read through the very descriptor whose seal verified;
// closed at once by close() (Python may keep the object longer).
class CheckpointPayload {
 public:
  explicit CheckpointPayload(std::unique_ptr<nano::CheckpointReader> r) : reader_(std::move(r)) {}
  nano::CheckpointReader& reader() const {
    if (!reader_) throw nano::Error("nano: a checkpoint's payload was read after it was closed");
    return *reader_;
  }
  void close() { reader_.reset(); }

 private:
  std::unique_ptr<nano::CheckpointReader> reader_;
};

// The one checkpoint engine (runtime/checkpoint_files/checkpoint_folder.h): the Python API hands
// it what torch.save wrote and gets back verified bytes; the format, the seal, the key, which
// files count and pruning are all the C++ engine's.
void bind_checkpoint_folder(py::module_& m) {
  using Folder = nano::CheckpointFolder;
  py::class_<Folder>(m, "CheckpointFolder", "A checkpoint folder of the Python API (checkpoint_folder.h).")
      .def(py::init([](const std::string& dir, bool writer, bool shared) {
             // Without the GIL only while the folder is opened: pybind registers the instance with it.
             std::unique_ptr<Folder> made;
             std::string refused;
             {
               py::gil_scoped_release release;
               try {
                 made = std::make_unique<Folder>(dir, nano::kPythonCheckpoints,
                                                 writer ? Folder::Role::kWriter : Folder::Role::kReader, shared);
               } catch (const nano::UsageError& e) {
                 refused = e.what();
               }
             }
             if (!made) throw py::value_error(refused);
             return made;
           }),
           py::arg("dir"), py::arg("writer"), py::arg("shared"),
           "Opens `dir` (a writer makes it 0700 with its key); ValueError when it is not this user's alone and "
           "`shared` is false, RuntimeError when its key is not the user's private file or is missing.")
      .def_property_readonly("dir", &Folder::dir)
      .def(
          "choose",
          [](Folder& f) {
            nano::CheckpointChoice c;
            {
              py::gil_scoped_release release;
              c = f.choose();
            }
            py::dict d;
            d["name"] = c.name;
            d["seal"] = c.seal;
            d["step"] = c.step;
            d["world"] = c.world;
            d["refused"] = c.refused;
            return d;
          },
          "The newest whole checkpoint (name, seal, step, world; name '' when none, refused: why not start at "
          "all); what does not count is named in one line.")
      .def(
          "start",
          [](Folder& f, int64_t step, int world, const std::string& torch) {
            py::gil_scoped_release release;
            return f.start(step, world, torch);
          },
          py::arg("step"), py::arg("world"), py::arg("torch"), py::keep_alive<0, 1>(),  // the folder outlives it
          "A checkpoint being written: a file object torch.save writes into; finish() seals it and gives its name.")
      .def(
          "prune",
          [](Folder& f, int keep, nano::FolderClaim* claim) {
            py::gil_scoped_release release;
            return f.prune(keep, [claim] {
              if (claim) claim->check();
            });
          },
          py::arg("keep"), py::arg("claim"),
          "Deletes checkpoints beyond the `keep` newest that verify (the claim checked first); the names deleted.")
      .def("remove_temporaries", &Folder::remove_temporaries, py::call_guard<py::gil_scoped_release>())
      .def(
          "open_verified",
          [](Folder& f, const std::string& name, const std::string& seal) {
            py::gil_scoped_release release;
            return CheckpointPayload{f.open_verified(name, seal)};
          },
          py::arg("name"), py::arg("seal"),
          "Opens checkpoint `name` and verifies its seal (RuntimeError naming it when it does not hold, or it is not "
          "the one sealed `seal`): its payload, each chunk verified as it is read.")
      .def("damaged", &Folder::damaged, py::arg("name"), py::arg("why"), py::call_guard<py::gil_scoped_release>(),
           "Checkpoint `name` was found damaged as it was loaded: named, and never chosen again.");
  py::class_<CheckpointPayload>(m, "CheckpointPayload", "A verified checkpoint's payload (checkpoint_reader.h).")
      .def_property_readonly("bytes", [](const CheckpointPayload& p) { return p.reader().header().bytes; })
      .def(
          "read_into",
          [](CheckpointPayload& p, uint64_t at, const py::buffer& into) {
            const py::buffer_info b = into.request(true);
            const size_t n = static_cast<size_t>(b.size * b.itemsize);
            py::gil_scoped_release release;
            return p.reader().read(at, b.ptr, n);
          },
          py::arg("at"), py::arg("into"),
          "Reads payload bytes at `at` into the writable buffer `into`, once their chunks verified: the count read "
          "(RuntimeError naming the chunk when one does not verify).")
      .def(
          "wait_verified", [](CheckpointPayload& p) { p.reader().wait_verified(); },
          py::call_guard<py::gil_scoped_release>(), "Waits until every chunk verified (RuntimeError as read_into).")
      .def(
          "why_damaged", [](const CheckpointPayload& p) { return p.reader().why_damaged(); },
          "The first chunk found damaged, in one line ('' while none).")
      .def(
          "close", [](CheckpointPayload& p) { p.close(); }, py::call_guard<py::gil_scoped_release>(),
          "Closes the file (its verifying threads stopped first).");
  py::class_<Folder::Writer>(m, "CheckpointWriter", "One checkpoint being written (checkpoint_folder.h).")
      .def(
          "write",
          [](Folder::Writer& w, const py::buffer& data) {
            const py::buffer_info b = data.request();
            const size_t n = static_cast<size_t>(b.size * b.itemsize);
            py::gil_scoped_release release;
            try {
              w.append(b.ptr, n);
            } catch (const nano::Error&) {
              // Said by finish(), with its cause: raised here, torch.save's writer (torch 1.13)
              // raises again from its destructor and ends the process.
            }
            return n;
          },
          py::arg("data"))
      .def("flush", [](Folder::Writer&) {})
      .def("finish", &Folder::Writer::finish, py::call_guard<py::gil_scoped_release>(),
           "Seals, fsyncs and names the checkpoint: its file name.")
      .def("abort", &Folder::Writer::abort, py::call_guard<py::gil_scoped_release>(),
           "Gives the checkpoint up (its temporary goes); nothing after finish().");
  m.def(
      "check_checkpoint_settings",
      [](int64_t every_steps, double every_seconds, int keep) {
        try {
          nano::check_checkpoint_settings(every_steps, every_seconds, keep);
        } catch (const nano::UsageError& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("every_steps"), py::arg("every_seconds"), py::arg("keep"),
      "ValueError naming the checkpoint setting that is out of range.");
  m.def("planned_stops_on", &nano::planned_stops_on,
        "Whether the launcher asked for a stop at the next checkpoint when a host comes back (--rejoin).");
  m.def("stop_asked", &nano::stop_asked, "Whether that stop was asked of this process.");
  m.def("stop_at_checkpoint", &nano::stop_at_checkpoint,
        "Ends the process at once with the planned stop's exit code (flush Python's streams first).");
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "nano's collectives as a torch.distributed backend";
  // torch's bindings register the base class (and the Store) that the values below cross as.
  py::module_::import("torch.distributed");
  // Returned as the base class torch has bound (ProcessGroup on 1.13, Backend on 2.x), as its
  // own C++ extensions of c10d do: nothing of ours needs a Python type.
  m.def(
      "create",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
         std::chrono::milliseconds join_within) {
        nano::TorchBackend::Options options = nano::torch_backend_options(rank, size, timeout);
        options.make_gloo_group = gloo_group;
        options.join_within = join_within;
        return c10::intrusive_ptr<nano::TorchBackendBase>(c10::make_intrusive<nano::TorchBackend>(store, options));
      },
      py::arg("store"), py::arg("rank"), py::arg("world_size"), py::arg("timeout"),
      py::arg("join_within") = std::chrono::milliseconds(-1), py::call_guard<py::gil_scoped_release>(),
      "Joins a nano process group (the creator given to register_backend); `join_within`: what is left of "
      "`timeout` for the ranks to join (negative: all of it).");
  m.def(
      "store",
      [](int rank, int size, std::chrono::milliseconds timeout) {
        return nano::rendezvous(nano::store_context_from_environment(rank, size, timeout), "nano/torch/");
      },
      py::arg("rank"), py::arg("world_size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
      "The job's store, as nano's own collectives meet in it: a file in /dev/shm when every rank is on "
      "this host, nano's job store (admitting only ranks that know NANO_JOB_SECRET) across the hosts of "
      "a nano-run job, else c10d's TCPStore on MASTER_ADDR:MASTER_PORT.");
  m.def(
      "_drain", [](std::chrono::milliseconds limit) { return nano::drain_torch_backends(limit); }, py::arg("limit"),
      py::call_guard<py::gil_scoped_release>(),
      "Waits (at most `limit`) until every nano backend of this process ran what was issued to it "
      "and released what that held; nano_torch calls it at the interpreter's exit.");
  m.def(
      "uses_shared_memory",
      [](const c10::intrusive_ptr<nano::TorchBackendBase>& backend) {
        const auto* nano_backend = dynamic_cast<const nano::TorchBackend*>(backend.get());
        return nano_backend != nullptr && nano_backend->uses_shared_memory();
      },
      "True when this nano backend's collectives go through shared memory.");
  m.def(
      "hierarchical",
      [](const c10::intrusive_ptr<nano::TorchBackendBase>& backend) {
        const auto* nano_backend = dynamic_cast<const nano::TorchBackend*>(backend.get());
        return nano_backend != nullptr && nano_backend->hierarchical();
      },
      "True when this nano backend spans hosts and its all-reduces are hierarchical.");
  // In both builds: a program under nano-run passes TorchNano its launch settings too.
  py::list fields;
  for (const char* field : nano::kSharedSettingFields) fields.append(field);
  m.attr("launch_setting_fields") = py::tuple(fields);
  bind_timeline(m);
  bind_folder_claim(m);
  bind_checkpoint_folder(m);
#ifndef NANO_TORCH_WITHOUT_LAUNCH
  nano::python::bind_launch(m);
#endif
}
