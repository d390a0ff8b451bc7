// examples/train_lm/cli.cpp: see cli.h. Every flag of TrainOptions / GenerateOptions is
// declared here once; README.md lists them.
#include "cli.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "trainer.h"

namespace train_lm {
namespace {

void add_tokenizer_flags(CLI::App& t, TokenizerSpec& s);

void add_train_flags(CLI::App& t, TrainOptions& f) {
  t.add_option("--preset", f.preset, "model size preset: tiny, small or medium")->capture_default_str();
  t.add_option("--context-length", f.model.context_length, "tokens per window (preset)");
  t.add_option("--emb-dim", f.model.emb_dim, "embedding width (preset)");
  t.add_option("--n-heads", f.model.n_heads, "attention heads (preset)");
  t.add_option("--n-layers", f.model.n_layers, "transformer blocks (preset)");
  t.add_option("--drop-rate", f.model.drop_rate, "dropout probability (preset)");
  t.add_flag("--qkv-bias", f.model.qkv_bias, "bias in the query/key/value projections");
  t.add_flag("--tie-weights", f.model.tie_weights,
             "share tok_emb.weight with out_head.weight, as GPT-2 does");
  t.add_option("--batch-size", f.batch_size, "sequences per step (preset)");
  t.add_option("--grad-accum", f.grad_accum,
               "micro-batches of --batch-size per optimizer step "
               "(gradient accumulation)")
      ->capture_default_str();
  t.add_option("--steps", f.steps, "optimizer steps in all; the cosine schedule's length")
      ->capture_default_str();
  t.add_option("--time-budget", f.time_budget, "stop (and save) after this many seconds; 0 = none")
      ->capture_default_str();
  t.add_option("--lr", f.lr, "peak learning rate")->capture_default_str();
  t.add_option("--min-lr", f.min_lr, "learning rate at the end of the cosine decay")->capture_default_str();
  t.add_option("--warmup", f.warmup, "linear warmup steps")->capture_default_str();
  t.add_option("--weight-decay", f.weight_decay, "AdamW weight decay (matrices only)")->capture_default_str();
  t.add_option("--beta1", f.beta1, "AdamW beta1")->capture_default_str();
  t.add_option("--beta2", f.beta2, "AdamW beta2")->capture_default_str();
  t.add_option("--grad-clip", f.grad_clip, "max gradient norm; 0 = off")->capture_default_str();
  t.add_option("--eval-interval", f.eval_interval, "steps between evaluations and checkpoints")
      ->capture_default_str();
  t.add_option("--eval-iters", f.eval_iters, "batches per loss estimate")->capture_default_str();
  t.add_option("--seed", f.seed, "random seed (init, batches, dropout, samples)")->capture_default_str();
  t.add_option("--threads", f.threads, "threads (xgrad::set_num_threads); 0 = default")
      ->capture_default_str();
  t.add_option("--checkpoint-dir", f.checkpoint_dir, "where checkpoints go")->capture_default_str();
  t.add_flag("--resume", f.resume, "continue from the latest checkpoint in --checkpoint-dir");
  t.add_option("--keep-checkpoints", f.keep_checkpoints, "step directories to keep")->capture_default_str();
  t.add_option("--sample-length", f.sample_length, "characters sampled at each evaluation; 0 = none")
      ->capture_default_str();
  t.add_option("--temperature", f.temperature, "sampling temperature; 0 = greedy")->capture_default_str();
  t.add_option("--top-k", f.top_k, "sample from the k most likely characters; 0 = all")
      ->capture_default_str();
  t.add_option("--top-p", f.top_p,
               "sample from the smallest set of characters whose "
               "probabilities add up to p (nucleus); 1 = all")
      ->capture_default_str();
  t.add_flag("--dry-run", f.dry_run,
             "check flags, corpus and checkpoint, print the memory "
             "estimate, and stop without writing anything");
  t.add_option("--data", f.data, "UTF-8 text corpus")->capture_default_str();
  t.add_option("--metrics", f.metrics, "CSV metrics file (default <checkpoint-dir>/metrics.csv)");
  t.add_flag("!--no-progress", f.progress, "plain log lines instead of the live progress bar");
  t.add_option("--profile", f.profile,
               "profile the first N optimizer steps of this run: print "
               "the op table and write <checkpoint-dir>/profile_trace.json; 0 = off")
      ->capture_default_str();
  add_tokenizer_flags(t, f.tokenizer);
}

void add_tokenizer_flags(CLI::App& t, TokenizerSpec& s) {
  t.add_option("--tokenizer", s.kind,
               "char (one token per character of the corpus), gpt2 "
               "(GPT-2's BPE, files from scripts/get_gpt2_vocab.sh) or bpe (a BPE learnt from "
               "the corpus)")
      ->capture_default_str();
  t.add_option("--gpt2-vocab", s.gpt2_vocab_dir, "directory with GPT-2's vocab.bpe and encoder.json")
      ->capture_default_str();
  t.add_option("--bpe-merges", s.bpe_merges,
               "--tokenizer bpe: merges to learn (vocabulary "
               "256 + merges)")
      ->capture_default_str();
  t.add_option("--bpe-file", s.bpe_file,
               "--tokenizer bpe: load the merges from this file "
               "(BPETokenizer::save's JSON) instead of learning them");
}

void add_generate_flags(CLI::App& g, GenerateOptions& o) {
  g.add_option("--checkpoint", o.checkpoint, "checkpoint directory (or a root with 'latest')")
      ->capture_default_str();
  g.add_option("--prompt", o.prompt, "text to continue")->capture_default_str();
  g.add_option("--max-new-tokens", o.max_new_tokens, "characters to generate")->capture_default_str();
  g.add_option("--temperature", o.temperature, "sampling temperature; 0 = greedy")->capture_default_str();
  g.add_option("--top-k", o.top_k, "sample from the k most likely characters; 0 = all")
      ->capture_default_str();
  g.add_option("--top-p", o.top_p,
               "nucleus sampling: the smallest set of characters whose "
               "probabilities add up to p; 1 = all")
      ->capture_default_str();
  g.add_option("--seed", o.seed, "random seed")->capture_default_str();
  g.add_option("--threads", o.threads, "threads (xgrad::set_num_threads); 0 = default")
      ->capture_default_str();
  g.add_flag("!--no-kv-cache", o.kv_cache,
             "recompute the whole window for every token instead "
             "of caching keys and values (the same text, slower)");
}

// Every numeric flag checks its text against its documented range before CLI11 converts it
// (CLI11's conversion clamps 99999999999999999999 to INT64_MAX); the range is in --help.
void add_range_checks(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty()) continue;
    const std::string flag = opt->get_lnames()[0];
    const FlagRange* r = flag_range(flag);
    if (!r) continue;
    opt->description(opt->get_description() + " (range " + describe_range(*r) + ")");
    opt->check(
        CLI::Validator([flag](std::string& text) { return check_flag_text(flag, text); }, "", "range"));
  }
}

}  // namespace

CliParse parse_cli(const std::vector<std::string>& args) {
  CliParse out;
  CLI::App app{"train_lm: train a GPT with xgrad (character-level by default), and sample from it"};
  app.require_subcommand(1);
  // a flag given twice takes its last value, so `scripts/train.sh --steps 4000` overrides the
  // script's own --steps (subcommands inherit this default)
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  TrainOptions f;
  CLI::App* train = app.add_subcommand("train", "train (or --resume) a model on a text corpus");
  add_train_flags(*train, f);
  GenerateOptions g;
  CLI::App* gen = app.add_subcommand("generate", "sample text from a checkpoint");
  add_generate_flags(*gen, g);
  TokenizeOptions k;
  CLI::App* tokenize =
      app.add_subcommand("tokenize", "print the token ids of a file, space-separated, on one line");
  add_tokenizer_flags(*tokenize, k.tokenizer);
  tokenize->add_option("--data", k.data, "UTF-8 text file")->capture_default_str();
  add_range_checks(*train);
  add_range_checks(*gen);
  add_range_checks(*tokenize);

  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  if (argv.empty()) argv.push_back("train_lm");
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    out.kind = CliParse::kExit;
    out.exit_code = app.exit(e);
    if (out.exit_code != 0) out.exit_code = 2;
    return out;
  }

  try {
    if (train->parsed()) {
      for (const CLI::Option* opt : train->get_options())
        if (opt->count() > 0 && !opt->get_lnames().empty()) f.explicit_flags.insert(opt->get_lnames()[0]);
      TrainOptions p;
      apply_preset(p, f.preset);
      auto given = [&](const char* flag) { return f.explicit_flags.count(flag) > 0; };
      if (!given("context-length")) f.model.context_length = p.model.context_length;
      if (!given("emb-dim")) f.model.emb_dim = p.model.emb_dim;
      if (!given("n-heads")) f.model.n_heads = p.model.n_heads;
      if (!given("n-layers")) f.model.n_layers = p.model.n_layers;
      if (!given("drop-rate")) f.model.drop_rate = p.model.drop_rate;
      if (!given("batch-size")) f.batch_size = p.batch_size;
      if (!given("warmup")) f.warmup = std::min<int64_t>(f.warmup, f.steps / 10);
      // On --resume the options not given come from the checkpoint: run_train validates
      // after merging them.
      if (!f.resume) validate(f);
      out.kind = CliParse::kTrain;
      out.train = std::move(f);
    } else if (tokenize->parsed()) {
      validate(k.tokenizer);
      if (k.data.empty()) throw ConfigError("--data must not be empty");
      out.kind = CliParse::kTokenize;
      out.tokenize = std::move(k);
    } else {
      validate(g);
      out.kind = CliParse::kGenerate;
      out.generate = std::move(g);
    }
  } catch (const ConfigError& e) {
    std::cerr << "train_lm: error: " << e.what() << "\n";
    out.kind = CliParse::kExit;
    out.exit_code = 2;
  }
  return out;
}

int run_cli(const std::vector<std::string>& args) {
  CliParse p = parse_cli(args);
  switch (p.kind) {
    case CliParse::kTrain:
      return run_train(std::move(p.train));
    case CliParse::kGenerate:
      return run_generate(p.generate);
    case CliParse::kTokenize:
      return run_tokenize(p.tokenize);
    case CliParse::kExit:
      break;
  }
  return p.exit_code;
}

}  // namespace train_lm
