// tests/io/test_save_load.cpp: the library's checkpoint API in PyTorch's spirit:
// xgrad::save(model.state_dict(), path) / model.load_state_dict(path), and the same for an
// optimizer's state. Round trips are exact; a bad file throws and changes nothing.
#include <gtest/gtest.h>

#include "train/train_test_util.h"
#include "xgrad/xgrad.h"

using namespace xgrad;
using train_test::expect_error;
using train_test::slurp;
using train_test::spit;
using train_test::TempDir;

namespace {

std::vector<std::vector<float>> values(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, t] : m.state_dict()) out.push_back(t.to_vector<float>());
  return out;
}

// One training step of `model` on a fixed batch.
void train_step(nn::Linear& model, optim::Optimizer& opt) {
  Generator g(11);
  Tensor x = randn({4, 3}, &g);
  Tensor loss = model(x).pow(2).mean();
  loss.backward();
  opt.step();
  opt.zero_grad();
}

TEST(SaveLoad, ModuleStateDictRoundTrip) {
  TempDir tmp;
  const auto path = tmp / "model.safetensors";
  manual_seed(1);
  nn::Linear a(3, 2);
  manual_seed(2);
  nn::Linear b(3, 2);
  ASSERT_NE(values(a), values(b));
  save(a.state_dict(), path, {{"step", "7"}});
  const io::SafetensorsFile f = load(path);
  EXPECT_EQ(f.metadata.at("step"), "7");
  EXPECT_TRUE(f.checksum_verified);
  EXPECT_TRUE(f.header_verified);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "weight");  // torch's names, in state_dict order
  EXPECT_EQ(f.tensors[1].first, "bias");
  b.load_state_dict(path);
  EXPECT_EQ(values(a), values(b));
  // the same through a loaded dict
  nn::Linear c(3, 2);
  c.load_state_dict(nn::StateDict::from(f.tensors));
  EXPECT_EQ(values(a), values(c));
}

TEST(SaveLoad, ABadModelFileChangesNothing) {
  TempDir tmp;
  manual_seed(1);
  nn::Linear a(3, 2);
  const auto before = values(a);
  // a flipped data byte: caught by the data checksum
  const auto path = tmp / "model.safetensors";
  save(a.state_dict(), path);
  std::string bytes = slurp(path);
  bytes[bytes.size() - 3] ^= 0x40;
  spit(path, bytes);
  expect_error([&] { a.load_state_dict(path); }, {"checksum mismatch", path.string()});
  EXPECT_EQ(values(a), before);
  // a file of another module: shapes do not fit, reported together, nothing loaded
  nn::Linear wide(5, 2);
  save(wide.state_dict(), path);
  expect_error([&] { a.load_state_dict(path); }, {"load_state_dict", "weight", "[2, 5]"});
  EXPECT_EQ(values(a), before);
  expect_error([&] { a.load_state_dict(tmp / "missing.safetensors"); }, {"no such file"});
  expect_error(
      [] {
        nn::StateDict::from({{"w", zeros({1})}, {"w", zeros({1})}});
      },
      {"StateDict::from", "'w' appears twice"});
}

TEST(SaveLoad, OptimizerStateRoundTripContinuesBitForBit) {
  TempDir tmp;
  const auto path = tmp / "optim.safetensors";
  manual_seed(3);
  nn::Linear m(3, 2);
  std::vector<optim::AdamW::ParamGroup> groups{{{m.weight}}, {{m.bias}, {.weight_decay = 0.0}}};
  optim::AdamW opt(groups, {.lr = 0.01, .betas = {0.9, 0.95}, .weight_decay = 0.1, .amsgrad = true});
  train_step(m, opt);
  train_step(m, opt);
  save(m.state_dict(), tmp / "model.safetensors");
  save(opt.state_dict(), path, {{"note", "kept"}});
  EXPECT_EQ(load(path).metadata.at("note"), "kept");
  EXPECT_EQ(load(path).metadata.at("optimizer"), "AdamW");
  train_step(m, opt);  // the reference: the run goes on
  const auto want = values(m);

  nn::Linear m2(3, 2);
  m2.load_state_dict(tmp / "model.safetensors");
  std::vector<optim::AdamW::ParamGroup> groups2{{{m2.weight}}, {{m2.bias}}};
  optim::AdamW opt2(groups2, {.lr = 0.5});  // options come from the file
  opt2.load_state_dict(path);
  EXPECT_EQ(opt2.options(0).lr, 0.01);
  EXPECT_EQ(opt2.options(0).betas.second, 0.95);
  EXPECT_EQ(opt2.options(1).weight_decay, 0.0);
  EXPECT_TRUE(opt2.options(1).amsgrad);
  EXPECT_EQ(opt2.state(0, 0).step, 2);
  train_step(m2, opt2);
  EXPECT_EQ(values(m2), want);  // the resumed run is the same to the bit

  // SGD through the same path
  optim::SGD sgd(m.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  train_step(m, sgd);
  save(sgd.state_dict(), tmp / "sgd.safetensors");
  optim::SGD sgd2(m2.parameters());
  sgd2.load_state_dict(tmp / "sgd.safetensors");
  EXPECT_TRUE(sgd2.options(0).nesterov);
  EXPECT_EQ(sgd2.state(0, 1).momentum_buffer.to_vector<float>(),
            sgd.state(0, 1).momentum_buffer.to_vector<float>());
}

TEST(SaveLoad, ABadOptimizerFileChangesNothing) {
  TempDir tmp;
  manual_seed(3);
  nn::Linear m(3, 2);
  optim::Adam opt(m.parameters(), {.lr = 0.01});
  train_step(m, opt);
  const optim::OptimizerState sd = opt.state_dict();
  auto unchanged = [&] {
    const optim::OptimizerState now = opt.state_dict();
    EXPECT_EQ(now.param_groups[0].options, sd.param_groups[0].options);
    EXPECT_EQ(now.state.at(0).at("exp_avg").to_vector<float>(),
              sd.state.at(0).at("exp_avg").to_vector<float>());
  };
  const auto path = tmp / "optim.safetensors";
  expect_error([&] { save(sd, path, {{"param_groups.0.lr", "1"}}); }, {"metadata key", "param_groups.0.lr"});
  EXPECT_FALSE(std::filesystem::exists(path));

  // files with the right checksums whose content is not an optimizer state of this layout
  save(sd, path);
  io::SafetensorsFile good = load(path);
  auto rewrite = [&](io::NamedTensors tensors, io::Metadata meta) {
    io::Metadata user;
    for (auto& [k, v] : meta)
      if (k.rfind("xgrad_", 0) != 0) user[k] = v;  // the writer adds the checksums again
    io::save_safetensors(path, tensors, user);
  };
  struct Case {
    const char* what;
    std::function<void(io::NamedTensors&, io::Metadata&)> change;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases{
      {"a non-number option",
       [](auto&, auto& m) { m["param_groups.0.lr"] = "0.01x"; },
       {"'param_groups.0.lr' is not a number"}},
      {"no params", [](auto&, auto& m) { m.erase("param_groups.0.params"); }, {"no 'param_groups.0.params'"}},
      {"bad params",
       [](auto&, auto& m) { m["param_groups.0.params"] = "0,,1"; },
       {"not a list of parameter indices"}},
      {"a group too many", [](auto&, auto& m) { m["param_groups.1.lr"] = "1"; }, {"names no param group"}},
      {"no type", [](auto&, auto& m) { m.erase("optimizer"); }, {"metadata has no 'optimizer'"}},
      {"another type",
       [](auto&, auto& m) { m["optimizer"] = "SGD"; },
       {"state dict from SGD loaded into Adam"}},
      {"an unknown option",
       [](auto&, auto& m) { m["param_groups.0.momentum"] = "0.9"; },
       {"unknown option 'momentum'"}},
      {"a stray tensor",
       [](auto& t, auto&) { t.emplace_back("moment", zeros({1})); },
       {"unexpected tensor 'moment'"}},
      {"a mis-shaped moment",
       [](auto& t, auto&) {
         for (auto& [n, x] : t)
           if (n == "state.0.exp_avg") x = zeros({3, 2});
       },
       {"'exp_avg' of parameter 0 has shape [3, 2]"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    io::NamedTensors t = good.tensors;
    io::Metadata m = good.metadata;
    c.change(t, m);
    rewrite(t, m);
    try {
      opt.load_state_dict(path);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      for (const auto& part : c.message)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
    unchanged();
  }
}

TEST(SaveLoad, OptimizerStateInMemoryIsTheSavedFile) {
  // to_safetensors is what save writes (so a checkpoint can hold it next to other files), and
  // from() reads it back to the same state
  TempDir tmp;
  manual_seed(3);
  nn::Linear m(3, 2);
  optim::AdamW opt(m.parameters(), {.lr = 0.01});
  train_step(m, opt);
  const optim::OptimizerState sd = opt.state_dict();
  const io::SafetensorsFile mem = sd.to_safetensors({{"step", "1"}});
  save(sd, tmp / "o.safetensors", {{"step", "1"}});
  const io::SafetensorsFile disk = load(tmp / "o.safetensors");
  ASSERT_EQ(mem.tensors.size(), disk.tensors.size());
  for (std::size_t i = 0; i < mem.tensors.size(); ++i) {
    EXPECT_EQ(mem.tensors[i].first, disk.tensors[i].first);
    EXPECT_EQ(mem.tensors[i].second.to_vector<double>(), disk.tensors[i].second.to_vector<double>());
  }
  for (const auto& [k, v] : mem.metadata) EXPECT_EQ(disk.metadata.at(k), v) << k;
  EXPECT_EQ(mem.metadata.at("optimizer"), "AdamW");
  EXPECT_EQ(mem.metadata.at("param_groups.0.params"), "0,1");
  const optim::OptimizerState back = optim::OptimizerState::from(mem);
  EXPECT_EQ(back.type, sd.type);
  EXPECT_EQ(back.param_groups[0].options, sd.param_groups[0].options);
  EXPECT_EQ(back.state.at(1).at("exp_avg_sq").to_vector<float>(),
            sd.state.at(1).at("exp_avg_sq").to_vector<float>());
  expect_error([&] { sd.to_safetensors({{"optimizer", "x"}}, "ck"); }, {"ck", "metadata key 'optimizer'"});
}

}  // namespace
