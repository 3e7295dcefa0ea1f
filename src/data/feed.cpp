#include "data/feed.h"

#include <cstring>
#include <vector>

#include "trainstep/error.h"

namespace ts {

TensorType batch_major(const TensorType& t, int bd) {
  if (bd < 0 || bd >= static_cast<int>(t.shape.size()))
    fail("batch dim " + std::to_string(bd) + " is not a dim of " + t.str());
  TensorType r = t;
  r.shape.erase(r.shape.begin() + bd);
  r.shape.insert(r.shape.begin(), t.shape[bd]);
  return r;
}

namespace {

// A dataset of the deprecated one-input, one-target form as fields "x" and
// "y", shaped as one row of the ports it was checked against. write() fills
// both, so a read of one field writes the other into scratch.
class LegacyFields : public Dataset {
 public:
  LegacyFields(const Dataset& d, TensorType x, TensorType y) : d_(d) {
    x.shape[0] = y.shape[0] = 1;
    x_ = std::move(x);
    y_ = std::move(y);
  }
  int64_t size() const override { return d_.size(); }
  std::string describe() const override { return d_.describe(); }
  std::vector<Field> fields() const override {
    return {{"x", x_.dtype, Shape(x_.shape.begin() + 1, x_.shape.end())},
            {"y", y_.dtype, Shape(y_.shape.begin() + 1, y_.shape.end())}};
  }
  void read(int64_t i, const ReadContext&, void* const* out) const override {
    thread_local std::vector<char> scratch;
    scratch.resize(x_.nbytes() + y_.nbytes());
    Tensor x{x_.dtype, x_.shape, out[0] ? out[0] : scratch.data()};
    Tensor y{y_.dtype, y_.shape, out[1] ? out[1] : scratch.data() + x_.nbytes()};
    d_.write(i, 0, x, y);
  }

 private:
  const Dataset& d_;
  TensorType x_, y_;
};

std::string port_words(const PortSpec& p) {
  return std::string(p.target ? "target" : "input") + " port '" + p.name + "' (" + p.type.str() + ")";
}

std::string field_list(const std::vector<Field>& fs) {
  std::string s;
  for (const Field& f : fs) s += (s.empty() ? "" : ", ") + f.str();
  return s.empty() ? "none" : s;
}

// The field for port p, or npos.
size_t find_field(const std::vector<Field>& fs, const std::string& name) {
  for (size_t k = 0; k < fs.size(); ++k)
    if (fs[k].name == name) return k;
  return std::string::npos;
}

}  // namespace

Feed make_feed(const Dataset& d, std::vector<PortSpec> ports, int64_t batch,
               const std::map<std::string, std::string>& map) {
  Feed f;
  f.ports = std::move(ports);
  int n_in = 0, n_tgt = 0;
  for (const PortSpec& p : f.ports) (p.target ? n_tgt : n_in)++;
  for (const auto& [port, field] : map) {
    bool known = false;
    std::string names;
    for (const PortSpec& p : f.ports) {
      known |= p.name == port;
      names += (names.empty() ? "" : ", ") + p.name;
    }
    if (!known) fail("--map " + port + "=" + field + ": the step has no port '" + port + "' (its ports: " + names + ")");
  }
  for (const PortSpec& p : f.ports) f.rows.push_back(batch_major(p.type, p.batch_dim));

  std::vector<Field> fs = d.fields();
  f.data = &d;
  if (fs.empty()) {  // the deprecated form: one input, one target
    if (n_in != 1 || n_tgt != 1) {
      std::string names;
      for (const PortSpec& p : f.ports) names += (names.empty() ? "" : ", ") + p.name;
      fail("the step takes " + std::to_string(n_in) + " input and " + std::to_string(n_tgt) +
           " target tensors (" + names + "), and the dataset (" + d.describe() +
           ") feeds one of each; give it fields() (trainstep/dataset.h)");
    }
    const size_t xi = f.ports[0].target ? 1 : 0;
    d.check(batch, f.rows[xi], f.rows[1 - xi]);
    f.adapter = std::make_unique<LegacyFields>(d, f.rows[xi], f.rows[1 - xi]);
    f.data = f.adapter.get();
    fs = f.data->fields();
  }
  f.nfields = fs.size();
  for (size_t k = 0; k < f.ports.size(); ++k) {
    const PortSpec& p = f.ports[k];
    size_t at = std::string::npos;
    std::string why;
    if (auto m = map.find(p.name); m != map.end()) {
      at = find_field(fs, m->second);
      if (at == std::string::npos)
        fail(port_words(p) + " (--map " + p.name + "=" + m->second + "): the data (" +
             d.describe() + ") has no field '" + m->second + "'; its fields: " + field_list(fs));
    }
    if (at == std::string::npos) at = find_field(fs, p.name);
    if (const size_t slash = p.name.find('/'); at == std::string::npos && slash != std::string::npos)
      at = find_field(fs, p.name.substr(slash + 1));
    if ((p.target ? n_tgt : n_in) == 1)  // the usual names of a lone input or target
      for (const char* usual : p.target ? std::vector<const char*>{"y", "label", "labels"}
                                        : std::vector<const char*>{"x"})
        if (at == std::string::npos) at = find_field(fs, usual);
    if (at == std::string::npos)
      fail(port_words(p) + " has no field of that name in the data (" + d.describe() +
           "); its fields: " + field_list(fs) + ". Name one with --map " + p.name + "=FIELD");
    const Field& fd = fs[at];
    const int64_t row = batch > 0 ? p.type.numel() / batch : 0;
    if (fd.dtype != p.type.dtype || fd.numel() != row) {
      TensorType one = f.rows[k];
      one.shape.erase(one.shape.begin());
      fail(port_words(p) + " takes " + one.str() + " a sample, but the data's field " + fd.str() +
           " (" + d.describe() + ")" +
           (fd.dtype == p.type.dtype ? ": the sizes differ" : ": the dtypes differ"));
    }
    f.field.push_back(at);
  }
  return f;
}

}  // namespace ts
