// examples/train_lm/commands.cpp: `train_lm train`, `generate` and `tokenize` end to end. All
// checks that can fail come before anything is written, so a bad flag, corpus or checkpoint
// never overwrites an existing file.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "train.h"
#include "world.h"
#include "xgrad/error.h"
#include "xgrad/parallel.h"

namespace train_lm {

namespace io = xgrad::io;

std::optional<std::string> launch_problem(bool with_mpi, int launcher_size, int64_t batch_size) {
  const std::string n = std::to_string(launcher_size), batch = "--batch-size " + std::to_string(batch_size);
  if (launcher_size > 1 && !with_mpi)
    return "this train_lm was built without MPI (no libopenmpi-dev at configure time, or "
           "-DXGRAD_WITH_MPI=OFF), "
           "so it cannot train on the " +
           n +
           " processes mpirun started; install OpenMPI (scripts/deps.sh) and rebuild, or run train_lm "
           "without mpirun";
  if (launcher_size > batch_size)
    return batch + " is the global batch, shared by the " + n + " processes: it must be at least " + n +
           " (one row per process); raise --batch-size or start fewer processes (mpirun -np)";
  if (batch_size % launcher_size != 0)
    return batch + " is the global batch and must divide evenly among the " + n +
           " processes; use a multiple of " + n + " (e.g. " +
           std::to_string((batch_size / launcher_size + 1) * launcher_size) + ") or another -np";
  return std::nullopt;
}

void check_memory_fits(const TrainOptions& o, const MemoryEstimate& e, std::optional<double> available) {
  if (!available || e.total_bytes() <= *available) return;
  const GPTConfig& m = o.model;
  std::ostringstream os;
  os << "this configuration needs about " << format_bytes(e.total_bytes()) << " but "
     << format_bytes(*available) << " is available: ";
  if (e.activation_bytes >= e.state_bytes)
    os << "the activations (" << format_bytes(e.activation_bytes) << ") grow with --batch-size "
       << o.batch_size << " x --context-length " << m.context_length << " x (--emb-dim " << m.emb_dim
       << " x --n-layers " << m.n_layers << ", the vocabulary of " << m.vocab_size << ", --n-heads "
       << m.n_heads << " x --context-length); lower --batch-size or --context-length";
  else
    os << "the model's weights, gradients and AdamW state (" << format_bytes(e.state_bytes)
       << ") grow with --emb-dim " << m.emb_dim << " squared x --n-layers " << m.n_layers
       << "; lower --emb-dim or --n-layers";
  throw ConfigError(os.str());
}

namespace {

// xgrad's thread pool (OpenBLAS stays on one thread); 0 keeps xgrad's default.
void set_threads(int threads) {
  if (threads > 0) xgrad::set_num_threads(threads);
}

// The metadata entry `key` of a checkpoint file, parsed as JSON.
nlohmann::json meta_json(const io::SafetensorsFile& f, const std::string& file, const char* key,
                         const char* missing_hint = "") {
  auto it = f.metadata.find(key);
  if (it == f.metadata.end()) xgrad::fail("checkpoint", file, ": metadata has no '", key, "'", missing_hint);
  nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
  if (j.is_discarded()) xgrad::fail("checkpoint", file, ": metadata '", key, "' is not valid JSON");
  return j;
}

// The saved model config, with the file named in any problem.
GPTConfig saved_config(const io::SafetensorsFile& f, const std::string& file, const char* missing_hint = "") {
  try {
    return gpt_config_from_json(meta_json(f, file, "config", missing_hint));
  } catch (const ConfigError& e) {
    xgrad::fail("checkpoint", file, ": ", e.what());
  }
}

int error_exit(const std::string& what, int code = 1) {
  spdlog::error("{}", what);
  return code;
}

// The metrics file is inside the checkpoint directory (the default --metrics).
bool metrics_in_checkpoint_dir(const TrainOptions& o) {
  std::error_code ec;
  const fs::path m = fs::weakly_canonical(fs::path(o.metrics_path()), ec).parent_path();
  return !ec && m == fs::weakly_canonical(fs::path(o.checkpoint_dir), ec) && !ec;
}

// run_train in the world join_world() made (world.h): one process, or one rank of N.
int train_in_world(TrainOptions o) {
  try {
    set_threads(o.threads);
    const fs::path root = o.checkpoint_dir;

    // 1. the checkpoint to resume, or the proof that we would not overwrite one
    std::optional<io::Checkpoint> ck;
    std::error_code ec;
    const std::optional<fs::path> existing =
        fs::exists(root, ec) ? io::find_checkpoint(root, kModelFile) : std::nullopt;
    // a directory a failed first run left (a metrics file, no checkpoint) starts again
    const bool failed_first_run =
        !existing && fs::exists(o.metrics_path(), ec) && metrics_in_checkpoint_dir(o);
    if (o.resume && existing) {
      ck = io::load_checkpoint(*existing, {kModelFile, kTrainStateFile});
      const io::SafetensorsFile& state = ck->at(kTrainStateFile);
      const std::string file = (ck->dir / kTrainStateFile).string();
      merge_saved_options(o, meta_json(state, file, "train_options"), saved_config(state, file));
      validate(o);
    } else if (o.resume && !failed_first_run) {
      return error_exit(
          "--resume: no checkpoint in " + root.string() + " (train without --resume to start one)", 1);
    } else if (existing) {
      return error_exit("checkpoint directory " + root.string() +
                            " already holds a checkpoint; pass --resume to continue it, or choose "
                            "another --checkpoint-dir",
                        1);
    }
    if (!ck) validate(o);  // --resume of a failed first run: parse_cli left it to us
    if (auto problem = launch_problem(built_with_mpi(), launcher_world_size(), o.batch_size)) {
      if (world().is_main() && launcher_rank() == 0) spdlog::error("{}", *problem);  // once
      leave_world();  // every rank finds the same problem: a clean end, no abort
      return 2;
    }

    // 2. the corpus, and its tokenizer: a resumed gpt2 or bpe run keeps the checkpoint's
    // (a char vocabulary is rebuilt from the corpus, and Trainer::load compares the two)
    std::string text = read_corpus(o.data);
    std::shared_ptr<const Tokenizer> tokenizer;
    if (ck) {
      auto it = ck->at(kTrainStateFile).metadata.find("vocab");
      if (it != ck->at(kTrainStateFile).metadata.end()) {
        std::shared_ptr<const Tokenizer> saved = xgrad::text::tokenizer_from_json(it->second);
        if (saved->kind() != "char") tokenizer = std::move(saved);
      }
    }
    if (!tokenizer) tokenizer = make_tokenizer(o.tokenizer, text, o.data);
    Corpus corpus = make_corpus(text, o.model.context_length, o.data, tokenizer);
    spdlog::info("tokenizer: {}, vocabulary {}; corpus {} bytes -> {} tokens", tokenizer->kind(),
                 tokenizer->vocab_size(), text.size(), corpus.split.train.size() + corpus.split.val.size());
    text.clear();
    text.shrink_to_fit();

    // 3. memory, before anything is allocated
    o.model.vocab_size = corpus.tokenizer->vocab_size();  // as the Trainer will set it
    const GPTConfig& full = o.model;
    const MemoryEstimate mem = estimate_training_memory(full, o.batch_size);
    const std::optional<double> available = available_memory_bytes();
    check_memory_fits(o, mem, available);
    if (o.dry_run) {
      if (world().is_main())
        std::cout << "dry run: "
                  << (ck ? "would resume " + ck->dir.string() : "would start a new run in " + root.string())
                  << "; corpus " << o.data << " (vocabulary " << full.vocab_size << ")\n"
                  << describe_memory(mem, available) << "\nnothing was written" << std::endl;
      return 0;
    }
    spdlog::info("{}", describe_memory(mem, available));

    // 4. writable outputs, before any training time is spent (rank 0 writes them all, once
    // every rank has looked at the directory)
    world_barrier();
    if (world().is_main()) {
      io::check_writable_dir(root);
      // a metrics file left by a run that stopped before its first checkpoint (NaN loss, out
      // of memory, killed) is kept under a new name, and the directory starts again (issue #13)
      if (failed_first_run && fs::exists(o.metrics_path(), ec))
        spdlog::warn(
            "{} holds no checkpoint: the metrics of the run that stopped before its first checkpoint are "
            "kept as {}; "
            "starting from step 0",
            o.checkpoint_dir, MetricsLog::set_aside(o.metrics_path()).string());
    }
    Trainer trainer(o, std::move(corpus));
    if (ck) {
      trainer.load(*ck);  // config, vocabulary and tensors checked here
      spdlog::info("resumed from {} at step {}", ck->dir.string(), trainer.step());
      ck.reset();
    }
    // a new run refuses an existing metrics file; a resumed one drops the rows after its step
    std::optional<MetricsLog> metrics;
    if (world().is_main()) metrics.emplace(o.metrics_path(), trainer.step() > 0 ? trainer.step() : -1);
    if (metrics && !metrics->note().empty()) spdlog::warn("{}", metrics->note());
    const auto& m = trainer.options().model;
    spdlog::info(
        "model: {} layers, {} heads, emb {}, context {}, vocab {} ({} parameters); "
        "batch {}{} x {} micro-batches, {} steps, lr {} -> {}",
        m.n_layers, m.n_heads, m.emb_dim, m.context_length, m.vocab_size, trainer.model().num_parameters(),
        o.batch_size, world().size > 1 ? " over " + std::to_string(world().size) + " processes" : "",
        o.grad_accum, o.steps, o.lr, o.min_lr);
    if (trainer.step() >= o.steps) {
      spdlog::info("already at step {} of {}; raise --steps to train further", trainer.step(), o.steps);
      return 0;
    }

    std::optional<Progress> progress;
    if (world().is_main()) progress.emplace(o.steps, o.progress && Progress::stdout_is_terminal(), 10);
    TrainResult r = trainer.train(progress ? &*progress : nullptr, metrics ? &*metrics : nullptr);
    if (metrics) try {
        fs::path plot = plot_loss_curve(metrics->rows(), metrics->path());
        spdlog::info("metrics: {}, loss curve: {}", metrics->path().string(), plot.string());
      } catch (const std::exception& e) {
        spdlog::warn("could not plot the loss curve: {}", e.what());
      }
    if (r.nan_stop) {
      std::optional<fs::path> last = io::find_checkpoint(root, kModelFile);
      return error_exit("training stopped: the loss is not finite. The last good checkpoint is " +
                            (last ? last->string() : std::string("(none yet)")),
                        1);
    }
    spdlog::info("done: step {}{}", r.step,
                 r.last_checkpoint ? ", checkpoint " + r.last_checkpoint->string() : "");
    return 0;
  } catch (const ConfigError& e) {
    return error_exit(e.what(), 2);
  } catch (const std::exception& e) {
    return error_exit(e.what(), 1);
  }
}

}  // namespace

int run_train(TrainOptions o) {
  try {
    join_world();  // mpirun -np N: this process is one rank of N (world.h)
  } catch (const std::exception& e) {
    return error_exit(e.what(), 1);
  }
  const int code = train_in_world(std::move(o));
  // an error on some ranks only would leave the others waiting in a collective: end the job
  if (code != 0 && world().size > 1) return abort_world(code);
  leave_world();
  return code;
}

int run_generate(const GenerateOptions& o) {
  try {
    set_threads(o.threads);
    // the model file alone (a train state, when present, must be from the same save)
    const io::Checkpoint ck = io::load_checkpoint(o.checkpoint, {kModelFile}, {kTrainStateFile});
    const io::SafetensorsFile& model_file = ck.at(kModelFile);
    const std::string file = (ck.dir / kModelFile).string();
    const char* hint = " (a train_lm checkpoint stores its config and vocabulary there)";
    const GPTConfig cfg = saved_config(model_file, file, hint);
    meta_json(model_file, file, "vocab", hint);  // present and JSON
    std::unique_ptr<Tokenizer> tok = xgrad::text::tokenizer_from_json(model_file.metadata.at("vocab"));
    if (tok->vocab_size() != cfg.vocab_size)
      xgrad::fail("checkpoint", file, ": the ", tok->kind(), " vocabulary has ", tok->vocab_size(),
                  " tokens but the config says vocab_size ", cfg.vocab_size);
    std::vector<int64_t> prompt = tok->encode(o.prompt);
    if (prompt.empty()) return error_exit("--prompt must not be empty", 2);

    xgrad::manual_seed(o.seed);
    xgrad::nn::GPTModel model(cfg);
    try {
      model.load_state_dict(xgrad::nn::StateDict::from(model_file.tensors));
    } catch (const xgrad::Error& e) {
      xgrad::fail("checkpoint", file, " does not fit its own config: ", e.what());
    }
    xgrad::Generator gen(o.seed);
    std::vector<int64_t> ids =
        generate_tokens(model, prompt, o.max_new_tokens, o.temperature, o.top_k, gen, o.top_p, o.kv_cache);
    std::cout << tok->decode(ids) << std::endl;
    return 0;
  } catch (const ConfigError& e) {
    return error_exit(e.what(), 2);
  } catch (const std::exception& e) {
    return error_exit(e.what(), 1);
  }
}

int run_tokenize(const TokenizeOptions& o) {
  try {
    const std::string text = read_corpus(o.data);
    std::shared_ptr<const Tokenizer> tok = make_tokenizer(o.tokenizer, text, o.data);
    const std::vector<int64_t> ids = tok->encode(text);
    std::string line;
    line.reserve(ids.size() * 6);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(ids[i]);
    }
    line += '\n';
    std::cout.write(line.data(), static_cast<std::streamsize>(line.size()));
    std::cout.flush();
    if (!std::cout) return error_exit("tokenize: cannot write the ids to stdout", 1);
    return 0;
  } catch (const std::exception& e) {
    return error_exit(e.what(), 1);
  }
}

}  // namespace train_lm
