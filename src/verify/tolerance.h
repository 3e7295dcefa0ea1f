// Each verify check's tolerance: one given for all (--tol), or from the
// artifact's calibration (golden.calibration, docs/format.md): max(floor
// of the value's dtype, factor x how far eager moved from itself on that
// value under one rounding of noise), or kDefaultTol for an artifact
// exported without one.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "runtime/artifact.h"

namespace ts {

class Tolerance {
 public:
  static constexpr double kDefaultTol = 1e-4;

  // Throws ts::Error naming the artifact when its calibration is malformed.
  Tolerance(const Artifact& a, std::optional<double> given);

  // key: the value's name in golden.calibration.spread ("loss/0",
  // "delta/fc.weight", "eval/output0", ...).
  double operator()(const std::string& key, DType dt) const;

  // One sentence for the report: where the tolerances come from.
  std::string describe() const;

 private:
  std::optional<double> given_;
  bool calibrated_ = false;
  double factor_ = 0;
  int rounds_ = 0;
  std::string compute_;  // "bfloat16" under autocast: the noise is its rounding
  bool signs_ = false;   // a trial flipped near-zero gradients' signs ("signs")
  std::map<std::string, double> floor_, spread_;
};

}  // namespace ts
