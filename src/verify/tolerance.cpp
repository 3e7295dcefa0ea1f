#include "verify/tolerance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "trainstep/error.h"

namespace ts {

Tolerance::Tolerance(const Artifact& a, std::optional<double> given) : given_(given) {
  const json& g = a.program.golden;
  if (given_ || !g.contains("calibration")) return;
  const json& c = g.at("calibration");
  auto bad = [&](const std::string& what) {
    fail(a.path + ": golden.calibration." + what + " (export the artifact again)");
  };
  if (!c.is_object()) bad("is not an object");
  auto number = [&](const json& j, const std::string& what) {
    if (!j.is_number() || !std::isfinite(j.get<double>()) || j.get<double>() < 0)
      bad(what + " is not a number >= 0");
    return j.get<double>();
  };
  if (!c.contains("factor") || !c.contains("floor") || !c.contains("spread"))
    bad("lacks factor, floor or spread");
  factor_ = number(c.at("factor"), "factor");
  if (!c.at("floor").is_object() || !c.at("spread").is_object())
    bad("floor and spread must be objects");
  for (const auto& [k, v] : c.at("floor").items()) floor_[k] = number(v, "floor." + k);
  if (!floor_.count("float32")) bad("floor has no float32 entry");
  for (const auto& [k, v] : c.at("spread").items()) spread_[k] = number(v, "spread." + k);
  rounds_ = c.value("rounds", 0);
  if (c.contains("compute") && c.at("compute").is_string()) compute_ = c.at("compute").get<std::string>();
  if (c.contains("noise") && c.at("noise").is_array())
    for (const auto& n : c.at("noise"))
      signs_ = signs_ || (n.is_string() && n.get<std::string>() == "signs");
  calibrated_ = true;
}

double Tolerance::operator()(const std::string& key, DType dt) const {
  if (given_) return *given_;
  if (!calibrated_) return kDefaultTol;
  auto f = floor_.find(dtype_name(dt));
  double floor = f != floor_.end() ? f->second : floor_.at("float32");
  auto s = spread_.find(key);
  return std::max(floor, factor_ * (s != spread_.end() ? s->second : 0.0));
}

std::string Tolerance::describe() const {
  char line[512];
  if (given_) {
    std::snprintf(line, sizeof line, "tolerance %.1e for every value (--tol)", *given_);
  } else if (!calibrated_) {
    std::snprintf(line, sizeof line,
                  "tolerance %.1e for every value (the default: the artifact has no "
                  "calibration; export it again to calibrate)", kDefaultTol);
  } else {
    std::string floors;
    for (const auto& [k, v] : floor_) {
      char f[64];
      std::snprintf(f, sizeof f, "%s%.0e %s", floors.empty() ? "" : ", ", v, k.c_str());
      floors += f;
    }
    // Under autocast the noise is bfloat16's rounding, one on each.
    const std::string noise = compute_.empty()
                                  ? "one rounding on gradients, sqrt(fan-in) on parameters"
                                  : "one " + compute_ + " rounding on each gradient element, "
                                    "sqrt(fan-in) float32 ones on parameters" +
                                        std::string(signs_ ? ", the other sign for gradient "
                                                             "elements within a rounding of zero"
                                                           : "");
    std::snprintf(line, sizeof line,
                  "tolerance per value: max(floor, %g x eager's own spread), calibrated at "
                  "export (%d round(s) of noise: %s); floor %s; --tol overrides",
                  factor_, rounds_, noise.c_str(), floors.c_str());
  }
  return line;
}

}  // namespace ts
