// Sessions on different threads do not interfere: training several sessions
// concurrently, one per thread, gives bit for bit what each gives alone.
//
// Artifacts: $TRAINSTEP_ISOLATION_ARTIFACTS (comma-separated .tstep paths;
// tests/python/test_isolation.py sets it to exported MNIST models, so
// oneDNN convolutions and OpenMP kernels run) or else the tiny hand-built
// one. The sessions use different thread counts, so a thread-count setting
// leaking from one session to another would change the bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <thread>

#include "runtime/artifact.h"
#include "test_util.h"
#include "tiny_artifact.h"
#include "ir/program.h"
#include "trainstep/session.h"

namespace {

struct SessionRun {
  std::string path;
  int threads;
};

// One model input per artifact input slot and a target: the artifact's golden
// batches when it has them, else values derived from (step, element).
struct Batches {
  std::vector<std::vector<ts::HostTensor>> x;
  std::vector<ts::HostTensor> y;
};

Batches batches_for(const ts::Session& s, int steps) {
  const ts::Function& f = s.program().function("train_step");
  std::vector<const ts::Port*> ins;
  for (int i = 0;; ++i) {
    const ts::Port* p = nullptr;
    for (const auto& q : f.inputs)
      if (q.role == ts::Role::Input && q.index == i) p = &q;
    if (!p) break;
    ins.push_back(p);
  }
  const ts::TensorType& yt = f.inputs[f.find_input(ts::Role::Target)].type;
  Batches b;
  for (int k = 0; k < steps; ++k) {
    const std::string g = "golden/step" + std::to_string(k % 3) + "/";
    std::vector<ts::HostTensor> xs;
    for (size_t i = 0; i < ins.size(); ++i) {
      xs.emplace_back(ins[i]->type.dtype, ins[i]->type.shape);
      const ts::HostTensor* gold = s.artifact().tensors.find(g + "input" + std::to_string(i));
      if (gold) std::memcpy(xs.back().view.data, gold->view.data, gold->view.nbytes());
      else
        for (int64_t e = 0; e < xs.back().view.numel(); ++e)
          xs.back().view.as<float>()[e] = std::sin(0.37f * e + k);
    }
    b.x.push_back(std::move(xs));
    b.y.emplace_back(yt.dtype, yt.shape);
    if (const ts::HostTensor* gold = s.artifact().tensors.find(g + "target"))
      std::memcpy(b.y.back().view.data, gold->view.data, gold->view.nbytes());
  }
  return b;
}

// Opens a session, trains `steps` steps; returns the losses and every state
// tensor's bytes, in order.
std::string train(const SessionRun& r, int steps) {
  ts::SessionOptions o;
  o.threads = r.threads;
  auto s = ts::Session::open(r.path, o);
  Batches b = batches_for(*s, steps);
  std::string bits;
  for (int k = 0; k < steps; ++k) {
    std::vector<ts::Tensor> xs;
    for (const auto& t : b.x[k]) xs.push_back(t.view);
    float loss = s->train_step(xs, b.y[k].view);
    bits.append(reinterpret_cast<const char*>(&loss), sizeof loss);
  }
  for (const auto& n : s->state_names())
    bits.append(static_cast<const char*>(s->state(n).data), s->state(n).nbytes());
  return bits;
}

}  // namespace

TEST(Isolation, ConcurrentSessionsMatchSequentialRuns) {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("TRAINSTEP_ISOLATION_ARTIFACTS")) {
    std::stringstream ss(env);
    for (std::string p; std::getline(ss, p, ',');)
      if (!p.empty()) paths.push_back(p);
  }
  if (paths.empty()) paths.push_back(ts_test::write_tiny_artifact(ts_test::make_temp_dir()));
  // Every artifact at 1 and 2 threads, all at once.
  std::vector<SessionRun> runs;
  for (const auto& p : paths)
    for (int threads : {1, 2}) runs.push_back({p, threads});
  const int steps = 4;

  std::vector<std::string> alone;
  for (const auto& r : runs) alone.push_back(train(r, steps));

  std::vector<std::string> together(runs.size());
  std::vector<std::exception_ptr> errors(runs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < runs.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        together[i] = train(runs[i], steps);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < runs.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    EXPECT_TRUE(together[i] == alone[i])
        << runs[i].path << " at " << runs[i].threads << " threads differs when run concurrently";
    std::printf("isolation: %s, %d threads, %zu bytes compared\n", runs[i].path.c_str(),
                runs[i].threads, alone[i].size());
  }
}
