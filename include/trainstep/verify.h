// Verify an artifact against its golden trace, public: replay the steps the
// exporter recorded from eager PyTorch (same batches, same RNG) and compare
// every loss, every final state tensor, the first step's update and the
// eval outputs. It is what `trainstep verify` runs; a program of its own
// calls verify() and reads the report.
//
// A mismatch is a result, not an error: verify() returns a report whose
// ok() is false. It throws ts::Error only when it cannot compare at all
// (an unreadable artifact, one with no golden trace, a golden tensor of
// the wrong type, a step that fails).
//
// Tolerance: each value's |got - golden| is measured against the largest
// |golden| of that tensor (for the first step's update, against the
// update's own size). The allowed fraction is VerifyOptions::tol for every
// value when set, else each value's own, calibrated at export from how far
// eager PyTorch moves from itself under one rounding of noise (an artifact
// exported without calibration: 1e-4 for every value).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "trainstep/session.h"

namespace ts {

struct VerifyOptions {
  SessionOptions session;     // how the steps are compiled and run (device, threads, ...)
  std::optional<double> tol;  // one tolerance for every value; none: each value's calibrated one
  // First run golden step 0 through the unoptimised train_step and compare
  // every node's value with the eager value the exporter recorded (an
  // artifact exported with --trace-values), at `tol` or 1e-4.
  bool trace = false;
};

// One value compared with its golden counterpart.
struct VerifyCheck {
  // What was compared: "loss[step 0]", "state fc.weight", "update fc.bias",
  // "grad fc.weight", "eval output", "eval sample_loss", ...; the split
  // grad_step + apply_grads run's are prefixed "grad+apply ".
  std::string name;
  // Its key in the artifact's calibration: "loss/0", "state/fc.weight",
  // "delta/fc.bias", "grad/fc.weight", "eval/output0", ...
  std::string key;
  double max_abs = 0;   // largest |got - golden| (an update's: beyond one rounding of the state)
  // What max_abs is measured against: the largest |golden| (a loss: of the
  // whole series; an update: of the update itself).
  double scale = 0;
  double of_scale = 0;  // max_abs / scale: what must stay within tol
  double max_rel = 0;   // largest element-wise |got - golden| / |golden|
  double tol = 0;
  bool nonfinite = false;  // got has a NaN or inf where golden is finite
  bool ok = false;
};

// A node value of the trace that differs from the recorded eager one.
struct TraceMismatch {
  std::string node, op, value;
  // "node 'NODE' (OP) value 'VALUE': max_abs 1.234e-02  of_scale 5.678e-01",
  // or "...: is TYPE, recorded TYPE".
  std::string text;
};

// VerifyOptions::trace's result.
struct TraceReport {
  int compared = 0;                       // recorded node values compared
  int unrecorded = 0;                     // node values the export did not record
  std::vector<TraceMismatch> mismatches;  // in the order the nodes ran
};

struct VerifyReport {
  bool checksummed = true;  // false: an artifact written before checksums
  std::string device;       // where the steps ran (Session::device_description)
  std::string tolerance;    // how the tolerances were chosen, as one sentence
  std::optional<TraceReport> trace;  // with VerifyOptions::trace
  std::vector<VerifyCheck> checks;   // in the order compared
  // The first failure: "trace: " and the first mismatch's text, else the
  // first failed check's name; empty when everything matched.
  std::string failure;
  bool ok() const { return failure.empty(); }
};

// Progress as verify() goes, for a caller that shows it (the CLI prints a
// line per check). Every method defaults to nothing. A throw ends verify()
// with that error.
struct VerifyObserver {
  virtual ~VerifyObserver() = default;
  // The artifact is open: r.checksummed and r.device are set.
  virtual void on_open(const VerifyReport& r) {}
  // Its golden trace and tolerances are read (r.tolerance): comparing starts.
  virtual void on_start(const VerifyReport& r) {}
  virtual void on_trace_mismatch(const TraceMismatch& m) {}
  virtual void on_trace(const TraceReport& t) {}  // after the trace's last node
  virtual void on_check(const VerifyCheck& c) {}
};

// Opens the artifact at `artifact_path` (as Session::open does) and
// compares it with its golden trace. observer may be null.
VerifyReport verify(const std::string& artifact_path, const VerifyOptions& o = {},
                    VerifyObserver* observer = nullptr);

}  // namespace ts
