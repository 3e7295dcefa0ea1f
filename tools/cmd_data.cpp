// `trainstep data SPEC`: what a data source gives, before a run trains on
// it. It prints the source and its fields; --write saves samples exactly as
// the train loop would read them (augmentation included) to an .npz, to
// look at or to compare; --time reads samples on N threads and reports the
// rate, to size --data-threads.
#include <chrono>
#include <cstdio>
#include <exception>
#include <thread>
#include <vector>

#include "commands.h"
#include "trainstep/dataset.h"
#include "trainstep/error.h"
#include "trainstep/npz.h"

namespace tscli {

namespace {

struct DataArgs {
  std::string spec, split = "train", mode, write;
  uint64_t seed = 0;
  int64_t epoch = 0, first = 0, count = -1;
  bool time = false;
  int threads = 1;
};

int run_data(const DataArgs& a) {
  const ts::Split split = a.split == "test" ? ts::Split::Test : a.split == "all" ? ts::Split::All : ts::Split::Train;
  const auto d = ts::open_dataset(a.spec, split);
  const std::vector<ts::Field> fields = d->fields();
  if (fields.empty()) ts::fail("dataset '" + a.spec + "' has no named fields (a deprecated x/y dataset)");
  ts::ReadContext ctx;
  ctx.seed = a.seed;
  ctx.epoch = a.epoch;
  ctx.train = a.mode.empty() ? split == ts::Split::Train : a.mode == "train";
  const int64_t n = d->size();
  if (a.first >= n)
    ts::fail("--first " + std::to_string(a.first) + " is past the " + a.split + " split's " + std::to_string(n) +
             " samples");
  std::printf("%s: %s\n  %s split: %lld samples, read as in %s\n", a.spec.c_str(), d->describe().c_str(),
              a.split.c_str(), static_cast<long long>(n), ctx.train ? "training" : "evaluation");
  for (const auto& f : fields) std::printf("  field %s\n", f.str().c_str());

  if (!a.write.empty()) {
    const int64_t count = std::min(a.count < 0 ? int64_t{16} : a.count, n - a.first);
    std::vector<std::pair<std::string, ts::NpyArray>> arrays;
    std::vector<void*> out(fields.size());
    for (const auto& f : fields) {
      ts::NpyArray arr;
      arr.dtype = f.dtype;
      arr.shape = f.shape;
      arr.shape.insert(arr.shape.begin(), count);
      arr.data.resize(f.nbytes() * static_cast<size_t>(count));
      arrays.emplace_back(f.name, std::move(arr));
    }
    for (int64_t k = 0; k < count; ++k) {
      for (size_t f = 0; f < fields.size(); ++f) out[f] = arrays[f].second.data.data() + fields[f].nbytes() * k;
      d->read(a.first + k, ctx, out.data());
    }
    ts::write_npz(a.write, arrays);
    std::printf("wrote samples %lld..%lld to %s\n", static_cast<long long>(a.first),
                static_cast<long long>(a.first + count - 1), a.write.c_str());
  }

  if (a.time) {
    const int64_t count = a.count < 0 ? n - a.first : std::min(a.count, n - a.first);
    std::vector<std::exception_ptr> errors(a.threads);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < a.threads; ++t)
      pool.emplace_back([&, t] {
        try {
          std::vector<std::vector<uint8_t>> buf;
          std::vector<void*> out;
          for (const auto& f : fields) buf.emplace_back(f.nbytes()), out.push_back(buf.back().data());
          for (int64_t k = t; k < count; k += a.threads) d->read(a.first + k, ctx, out.data());
        } catch (...) {
          errors[t] = std::current_exception();
        }
      });
    for (auto& th : pool) th.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("read %lld samples in %.3f s on %d thread%s: %.1f samples/s, %.1f per thread\n",
                static_cast<long long>(count), s, a.threads, a.threads == 1 ? "" : "s", count / s,
                count / s / a.threads);
  }
  return 0;
}

}  // namespace

void add_data(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("data", "Show a data source's fields; write or time its samples");
  auto a = std::make_shared<DataArgs>();
  cmd->add_option("spec", a->spec, std::string("dataset: ") + ts::dataset_specs())->required();
  cmd->add_option("--split", a->split, "train (default), test or all")->check(CLI::IsMember({"train", "test", "all"}));
  cmd->add_option("--mode", a->mode, "read as in training (random crops, windows) or evaluation; default: "
                                    "training for the train split")
      ->check(CLI::IsMember({"train", "eval"}));
  cmd->add_option("--seed", a->seed, "the run's --seed (default 0)");
  cmd->add_option("--epoch", a->epoch, "0-based epoch of the reads (default 0)")->check(at_least(0));
  cmd->add_option("--first", a->first, "first sample (default 0)")->check(at_least(0));
  cmd->add_option("--count", a->count, "samples to write (default 16) or time (default all)")->check(at_least(1));
  cmd->add_option("--write", a->write, "write the samples to this .npz, one array per field");
  cmd->add_flag("--time", a->time, "read the samples and report samples per second");
  cmd->add_option("--threads", a->threads, "reading threads for --time (default 1)")->check(at_least(1));
  add_examples(cmd, {"trainstep data images:photos:224 --write crops.npz --count 8",
                     "trainstep data images:photos:224 --time --threads 2"});
  cmd->callback([a, &action] { action = [a] { return run_data(*a); }; });
}

}  // namespace tscli
