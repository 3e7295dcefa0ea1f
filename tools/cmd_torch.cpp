// `trainstep import-checkpoint` and `trainstep export-checkpoint`: PyTorch
// model/optimizer state dicts <-> trainstep checkpoints, converted by the
// Python side (python/trainstep/torch_checkpoint.py) for one artifact.
#include "commands.h"

namespace tscli {

void add_torch_checkpoint(CLI::App& app, Action& action, const char* argv0) {
  auto* imp = app.add_subcommand(
      "import-checkpoint",
      "PyTorch state dicts (torch.save({'model': ..., 'optimizer': ...})) -> a checkpoint "
      "that train --resume continues");
  auto ia = std::make_shared<std::string>(), src = std::make_shared<std::string>(),
       iout = std::make_shared<std::string>();
  auto seed = std::make_shared<long long>(0);
  auto step = std::make_shared<long long>(-1);
  imp->add_option("artifact", *ia, "NAME.tstep the checkpoint is for")->required();
  imp->add_option("torch_file", *src, "file written by torch.save")->required();
  imp->add_option("--out,-o", *iout, "trainstep checkpoint to write")->required();
  imp->add_option("--seed", *seed, "RNG / data-order seed the checkpoint carries");
  imp->add_option("--step", *step,
                  "global step (RNG offset, per-step schedule index); default: the "
                  "optimizer's step count");
  add_example(imp, "trainstep import-checkpoint mnist.tstep torch_state.pt --out mnist.ckpt");
  imp->callback([=, &action] {
    action = [=] {
      std::vector<std::string> args{"trainstep.torch_checkpoint", "import", *ia, *src,
                                    "--out", *iout, "--seed", std::to_string(*seed)};
      if (*step >= 0) {
        args.push_back("--step");
        args.push_back(std::to_string(*step));
      }
      return run_python(argv0, args);
    };
  });

  auto* exp = app.add_subcommand(
      "export-checkpoint",
      "a checkpoint -> torch.save'd {'model': state_dict, 'optimizer': state_dict} for "
      "model.load_state_dict / optimizer.load_state_dict");
  auto ea = std::make_shared<std::string>(), ck = std::make_shared<std::string>(),
       eout = std::make_shared<std::string>();
  exp->add_option("artifact", *ea, "NAME.tstep the checkpoint is for")->required();
  exp->add_option("checkpoint", *ck, "trainstep checkpoint")->required();
  exp->add_option("--out,-o", *eout, "file to write with torch.save")->required();
  add_example(exp, "trainstep export-checkpoint mnist.tstep mnist.ckpt --out mnist_state.pt");
  exp->callback([=, &action] {
    action = [=] {
      return run_python(argv0, {"trainstep.torch_checkpoint", "export", *ea, *ck, "--out", *eout});
    };
  });
}

}  // namespace tscli
