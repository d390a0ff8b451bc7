// examples/train_lm/commands.cpp: `train_lm train`, `generate` and `tokenize` end to end. All
// checks that can fail come before anything is written, so a bad flag, corpus or checkpoint
// never overwrites an existing file.
#include <spdlog/spdlog.h>

#include <iostream>

#include "train.h"
#include "world.h"
#include "xgrad/error.h"
#include "xgrad/parallel.h"

namespace train_lm {

namespace io = xgrad::io;

namespace {

int error_exit(const std::string& what, int code = 1) {
  spdlog::error("{}", what);
  return code;
}

// body()'s exit code, or the exit code of what it threw: 2 for a flag's problem, else 1.
template <class F>
int exit_code_of(F&& body) {
  try {
    return body();
  } catch (const ConfigError& e) {
    return error_exit(e.what(), 2);
  } catch (const std::exception& e) {
    return error_exit(e.what(), 1);
  }
}

// run_train in the world join_world() made (world.h): one process, or one rank of N.
int train_in_world(TrainOptions o) {
  return exit_code_of([&] {
    if (o.threads > 0) xgrad::set_num_threads(o.threads);  // 0: xgrad's default
    const fs::path root = o.checkpoint_dir;

    // 1. the checkpoint to resume, or the proof that we would not overwrite one; a directory a
    // failed first run left (a metrics file, no checkpoint) starts again
    std::optional<io::Checkpoint> ck;
    std::optional<SavedModel> saved;
    std::error_code ec;
    const auto existing = fs::exists(root, ec) ? io::find_checkpoint(root, kModelFile) : std::nullopt;
    const bool failed_first_run = !existing && MetricsLog::exists_in(o.metrics_path(), root);
    if (o.resume && existing) {
      ck = io::load_checkpoint(*existing, {kModelFile, kTrainStateFile});
      saved = read_saved_model(CheckpointMeta::of(*ck, kModelFile));
      merge_saved_options(o, CheckpointMeta::of(*ck, kTrainStateFile).json("train_options"), saved->config);
      if (!o.explicit_flags.count("arch")) o.arch = saved->arch;  // else Trainer::load compares them
    } else if (o.resume && !failed_first_run) {
      return error_exit("--resume: no checkpoint in " + root.string() +
                        " (train without --resume to start one)");
    } else if (existing) {
      return error_exit("checkpoint directory " + root.string() +
                        " already holds a checkpoint; pass --resume to continue it, or choose another "
                        "--checkpoint-dir");
    }
    validate(o);  // again: a --resume run (parse_cli left it to us) has merged the checkpoint's
    if (auto problem = launch_problem(built_with_mpi(), launcher_world_size(), o.batch_size)) {
      if (world().is_main() && launcher_rank() == 0) spdlog::error("{}", *problem);  // once
      leave_world();  // every rank finds the same problem: a clean end, no abort
      return 2;
    }

    // 2. the corpus, and its tokenizer: a resumed gpt2 or bpe run keeps the checkpoint's
    // (a char vocabulary is rebuilt from the corpus, and Trainer::load compares the two)
    const std::string text = read_corpus(o.data);
    auto tok = saved && saved->tokenizer->kind() != "char" ? saved->tokenizer
                                                           : make_tokenizer(o.tokenizer, text, o.data);
    Corpus corpus = make_corpus(text, o.model.context_length, o.data, tok);
    spdlog::info("tokenizer: {}, vocabulary {}; corpus {} bytes -> {} tokens", tok->kind(), tok->vocab_size(),
                 text.size(), corpus.split.train.size() + corpus.split.val.size());

    // 3. memory, before anything is allocated
    o.model.vocab_size = corpus.tokenizer->vocab_size();  // as the Trainer will set it
    const bool bf16 = o.dtype == "bf16";
    const MemoryEstimate mem = o.arch == "llama"
                                   ? estimate_training_memory(llama_config(o), o.batch_size, bf16)
                                   : estimate_training_memory(o.model, o.batch_size, bf16);
    const std::optional<double> available = available_memory_bytes();
    if (auto problem = memory_problem(o.model, o.batch_size, mem, available)) throw ConfigError(*problem);
    if (o.dry_run) {
      if (world().is_main())
        std::cout << "dry run: "
                  << (ck ? "would resume " + ck->dir.string() : "would start a new run in " + root.string())
                  << "; corpus " << o.data << " (vocabulary " << o.model.vocab_size << ")\n"
                  << describe_memory(mem, available) << "\nnothing was written" << std::endl;
      return 0;
    }
    spdlog::info("{}", describe_memory(mem, available));

    // 4. writable outputs, before any training time is spent (rank 0 writes them all, once
    // every rank has looked at the directory); the metrics of a run that stopped before its
    // first checkpoint (NaN loss, out of memory, killed) are kept under a new name
    world_barrier();
    if (world().is_main()) {
      io::check_writable_dir(root);
      if (failed_first_run && fs::exists(o.metrics_path(), ec))
        spdlog::warn(
            "{} holds no checkpoint: the metrics of the run that stopped before its first checkpoint "
            "are kept as {}; starting from step 0",
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
    const GPTConfig& m = o.model;
    spdlog::info(
        "model: {} layers, {} heads, emb {}, context {}, vocab {} ({} parameters); batch {}{} x {} "
        "micro-batches, {} steps, lr {} -> {}",
        m.n_layers, m.n_heads, m.emb_dim, m.context_length, m.vocab_size, trainer.module().num_parameters(),
        o.batch_size, world().size > 1 ? " over " + std::to_string(world().size) + " processes" : "",
        o.grad_accum, o.steps, o.lr, o.min_lr);
    if (trainer.step() >= o.steps) {
      spdlog::info("already at step {} of {}; raise --steps to train further", trainer.step(), o.steps);
      return 0;
    }

    std::optional<Progress> progress;
    if (world().is_main()) progress.emplace(o.steps, o.progress && Progress::stdout_is_terminal(), 10);
    const TrainResult r = trainer.train(progress ? &*progress : nullptr, metrics ? &*metrics : nullptr);
    if (metrics) try {
        spdlog::info("metrics: {}, loss curve: {}", metrics->path().string(),
                     plot_loss_curve(metrics->rows(), metrics->path()).string());
      } catch (const std::exception& e) {
        spdlog::warn("could not plot the loss curve: {}", e.what());
      }
    if (r.nan_stop) {
      const std::optional<fs::path> last = io::find_checkpoint(root, kModelFile);
      return error_exit("training stopped: the loss is not finite. The last good checkpoint is " +
                        (last ? last->string() : std::string("(none yet)")));
    }
    spdlog::info("done: step {}{}", r.step,
                 r.last_checkpoint ? ", checkpoint " + r.last_checkpoint->string() : "");
    return 0;
  });
}

// The commands: exit codes as run_cli's; errors are logged, never thrown.
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
  return exit_code_of([&] {
    if (o.threads > 0) xgrad::set_num_threads(o.threads);  // 0: xgrad's default
    // the model file alone (a train state, when present, must be from the same save)
    const io::Checkpoint ck = io::load_checkpoint(o.checkpoint, {kModelFile}, {kTrainStateFile});
    const SavedModel saved =
        read_saved_model(CheckpointMeta::of(ck, kModelFile),
                         " (a train_lm checkpoint stores its config and vocabulary there)");
    std::vector<int64_t> prompt = saved.tokenizer->encode(o.prompt);
    if (prompt.empty()) return error_exit("--prompt must not be empty", 2);

    xgrad::manual_seed(o.seed);
    const std::shared_ptr<xgrad::nn::Module> model = make_model(saved.arch, saved.config, saved.llama);
    xgrad::train::load_model(ck, *model);
    xgrad::Generator gen(o.seed);
    std::cout << saved.tokenizer->decode(generate_tokens(*model, prompt, o.max_new_tokens, o.sampling, gen))
              << std::endl;
    return 0;
  });
}

int run_tokenize(const TokenizeOptions& o) {
  return exit_code_of([&] {
    const std::string text = read_corpus(o.data);
    std::shared_ptr<const Tokenizer> tok = make_tokenizer(o.tokenizer, text, o.data);
    const std::vector<int64_t> ids = tok->encode(text);
    std::string line;
    for (const int64_t id : ids) (line += line.empty() ? "" : " ") += std::to_string(id);
    std::cout << line << std::endl;
    if (!std::cout) return error_exit("tokenize: cannot write the ids to stdout");
    return 0;
  });
}

}  // namespace

int run_cli(const std::vector<std::string>& args) {
  CliParse p = parse_cli(args);
  if (p.kind == CliParse::kTrain) return run_train(std::move(p.train));
  if (p.kind == CliParse::kGenerate) return run_generate(p.generate);
  if (p.kind == CliParse::kTokenize) return run_tokenize(p.tokenize);
  return p.exit_code;
}

}  // namespace train_lm
