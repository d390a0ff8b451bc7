// book_ch05: chapter 5 of "Build a Large Language Model (From Scratch)" (Raschka), the
// pretraining run of section 5.2, in C++: GPT-2 124M with a context of 256 tokens trained for
// ten epochs on a short story, printing the book's table and a sample after every epoch.
//
//   scripts/get_gpt2_vocab.sh                       # the GPT-2 tokenizer, into data/gpt2/
//   build/examples/book_ch05/book_ch05 --data the-verdict.txt
//   Ep 1 (Step 000000): Train loss 9.781, Val loss 9.933
//   ...
//
// The functions below are the book's (ch05.ipynb: calc_loss_batch, calc_loss_loader,
// evaluate_model, generate_text_simple, generate_and_print_sample, train_model_simple), with
// C++'s syntax. The random streams are torch's, so the same seed draws the same weights, the
// same shuffled batches and the same dropout masks. --tiny swaps in a two-layer model with a
// 16-token context, for a quick check of the loop (ctest runs it).
#include <xgrad/text/gpt_dataset.h>
#include <xgrad/text/tokenizer.h>
#include <xgrad/xgrad.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace xgrad;

// ---------------------------------------------------------------- chapter 5, as the book

Tensor text_to_token_ids(const std::string& text, const text::Tokenizer& tokenizer) {
  const std::vector<int64_t> encoded = tokenizer.encode(text);
  return from_vector(encoded, {static_cast<int64_t>(encoded.size())}).unsqueeze(0);  // add batch dimension
}

std::string token_ids_to_text(const Tensor& token_ids, const text::Tokenizer& tokenizer) {
  return tokenizer.decode(token_ids.squeeze(0).to_vector<int64_t>());  // remove batch dimension
}

Tensor calc_loss_batch(const Tensor& input_batch, const Tensor& target_batch, nn::GPTModel& model) {
  Tensor logits = model(input_batch);
  return cross_entropy(logits.flatten(0, 1), target_batch.flatten());
}

double calc_loss_loader(const data::DataLoader& data_loader, nn::GPTModel& model,
                        std::optional<int64_t> num_batches = std::nullopt) {
  double total_loss = 0.;
  if (data_loader.size() == 0) return std::numeric_limits<double>::quiet_NaN();
  // Reduce the number of batches to match the total number of batches in the data loader
  const int64_t n = num_batches ? std::min(*num_batches, data_loader.size()) : data_loader.size();
  int64_t i = 0;
  for (const data::Example& batch : data_loader) {  // (input_batch, target_batch)
    if (i++ < n) {
      total_loss += calc_loss_batch(batch[0], batch[1], model).item();
    } else {
      break;
    }
  }
  return total_loss / static_cast<double>(n);
}

std::pair<double, double> evaluate_model(nn::GPTModel& model, const data::DataLoader& train_loader,
                                         const data::DataLoader& val_loader, int64_t eval_iter) {
  model.eval();
  double train_loss, val_loss;
  {
    NoGradGuard no_grad;
    train_loss = calc_loss_loader(train_loader, model, eval_iter);
    val_loss = calc_loss_loader(val_loader, model, eval_iter);
  }
  model.train();
  return {train_loss, val_loss};
}

// idx is (B, T) array of indices in the current context
Tensor generate_text_simple(nn::GPTModel& model, Tensor idx, int64_t max_new_tokens, int64_t context_size) {
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    // Crop current context if it exceeds the supported context size
    const int64_t T = idx.size(1);
    Tensor idx_cond = idx.slice(1, std::max<int64_t>(0, T - context_size), T);
    Tensor logits;
    {
      NoGradGuard no_grad;
      logits = model(idx_cond);
    }
    logits = logits.select(1, -1);                           // (batch, vocab_size), the last time step
    Tensor idx_next = argmax(logits, -1, /*keepdim=*/true);  // (batch, 1)
    idx = cat({idx, idx_next}, 1);                           // (batch, n_tokens+1)
  }
  return idx;
}

void generate_and_print_sample(nn::GPTModel& model, const text::Tokenizer& tokenizer,
                               const std::string& start_context) {
  model.eval();
  const int64_t context_size = model.pos_emb->weight.size(0);
  Tensor encoded = text_to_token_ids(start_context, tokenizer);
  std::string decoded_text;
  {
    NoGradGuard no_grad;
    Tensor token_ids = generate_text_simple(model, encoded, 50, context_size);
    decoded_text = token_ids_to_text(token_ids, tokenizer);
  }
  std::replace(decoded_text.begin(), decoded_text.end(), '\n', ' ');  // Compact print format
  std::printf("%s\n", decoded_text.c_str());
  std::fflush(stdout);
  model.train();
}

struct Losses {
  std::vector<double> train_losses, val_losses;
  std::vector<int64_t> track_tokens_seen;
};

Losses train_model_simple(nn::GPTModel& model, const data::DataLoader& train_loader,
                          const data::DataLoader& val_loader, optim::Optimizer& optimizer, int64_t num_epochs,
                          int64_t eval_freq, int64_t eval_iter, const std::string& start_context,
                          const text::Tokenizer& tokenizer) {
  Losses out;
  int64_t tokens_seen = 0, global_step = -1;

  for (int64_t epoch = 0; epoch < num_epochs; ++epoch) {
    model.train();  // Set model to training mode

    for (const data::Example& batch : train_loader) {
      const Tensor& input_batch = batch[0];
      const Tensor& target_batch = batch[1];
      optimizer.zero_grad();  // Reset loss gradients from previous batch iteration
      Tensor loss = calc_loss_batch(input_batch, target_batch, model);
      loss.backward();   // Calculate loss gradients
      optimizer.step();  // Update model weights using loss gradients
      tokens_seen += input_batch.numel();
      global_step += 1;

      // Optional evaluation step
      if (global_step % eval_freq == 0) {
        auto [train_loss, val_loss] = evaluate_model(model, train_loader, val_loader, eval_iter);
        out.train_losses.push_back(train_loss);
        out.val_losses.push_back(val_loss);
        out.track_tokens_seen.push_back(tokens_seen);
        std::printf("Ep %lld (Step %06lld): Train loss %.3f, Val loss %.3f\n",
                    static_cast<long long>(epoch + 1), static_cast<long long>(global_step), train_loss,
                    val_loss);
        std::fflush(stdout);
      }
    }

    // Print a sample text after each epoch
    generate_and_print_sample(model, tokenizer, start_context);
  }
  return out;
}

// ---------------------------------------------------------------- the run (ch05.ipynb, 5.1.3 and 5.2)

int main(int argc, char** argv) {
  CLI::App app{
      "book_ch05: chapter 5 of \"Build a Large Language Model (From Scratch)\": pretrain GPT-2 124M "
      "(context 256) on a short story"};
  std::string data_path, gpt2_dir = "data/gpt2";
  int64_t num_epochs = 10;
  int threads = 0;
  bool tiny = false;
  app.add_option("--data", data_path, "the text to train on (the book's the-verdict.txt)")->required();
  app.add_option("--epochs", num_epochs, "epochs (the book: 10)")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "threads (xgrad::set_num_threads); 0 = all cores")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gpt2-dir", gpt2_dir, "vocab.bpe and encoder.json (scripts/get_gpt2_vocab.sh)");
  app.add_flag("--tiny", tiny, "a two-layer model with a 16-token context, to check the loop quickly");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) set_num_threads(threads);

  try {
    std::ifstream file(data_path, std::ios::binary);
    if (!file) fail("book_ch05", "cannot read --data ", data_path);
    const std::string text_data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const text::GPT2Tokenizer tokenizer =
        text::GPT2Tokenizer::from_files(gpt2_dir + "/vocab.bpe", gpt2_dir + "/encoder.json");

    nn::GPTConfig GPT_CONFIG_124M;
    GPT_CONFIG_124M.vocab_size = 50257;    // Vocabulary size
    GPT_CONFIG_124M.context_length = 256;  // Shortened context length (orig: 1024)
    GPT_CONFIG_124M.emb_dim = 768;         // Embedding dimension
    GPT_CONFIG_124M.n_heads = 12;          // Number of attention heads
    GPT_CONFIG_124M.n_layers = 12;         // Number of layers
    GPT_CONFIG_124M.drop_rate = 0.1;       // Dropout rate
    GPT_CONFIG_124M.qkv_bias = false;      // Query-key-value bias
    if (tiny) {
      GPT_CONFIG_124M.vocab_size = tokenizer.vocab_size();
      GPT_CONFIG_124M.context_length = 16;
      GPT_CONFIG_124M.emb_dim = 32;
      GPT_CONFIG_124M.n_heads = 4;
      GPT_CONFIG_124M.n_layers = 2;
    }

    // Train/validation ratio, on characters as Python's len(text_data) counts them
    const double train_ratio = 0.90;
    std::vector<std::size_t> char_starts;  // byte offset of each UTF-8 character
    for (std::size_t i = 0; i < text_data.size(); ++i)
      if ((static_cast<unsigned char>(text_data[i]) & 0xC0) != 0x80) char_starts.push_back(i);
    const auto split_char = static_cast<std::size_t>(train_ratio * static_cast<double>(char_starts.size()));
    const std::size_t split_idx =
        split_char < char_starts.size() ? char_starts[split_char] : text_data.size();
    const std::string train_data = text_data.substr(0, split_idx);
    const std::string val_data = text_data.substr(split_idx);

    manual_seed(123);
    data::DataLoader train_loader = text::create_dataloader(train_data, tokenizer,
                                                            {.batch_size = 2,
                                                             .max_length = GPT_CONFIG_124M.context_length,
                                                             .stride = GPT_CONFIG_124M.context_length,
                                                             .shuffle = true,
                                                             .drop_last = true,
                                                             .num_workers = 0});
    data::DataLoader val_loader = text::create_dataloader(val_data, tokenizer,
                                                          {.batch_size = 2,
                                                           .max_length = GPT_CONFIG_124M.context_length,
                                                           .stride = GPT_CONFIG_124M.context_length,
                                                           .shuffle = false,
                                                           .drop_last = false,
                                                           .num_workers = 0});

    manual_seed(123);
    nn::GPTModel model(GPT_CONFIG_124M);
    optim::AdamWOptions adamw;
    adamw.lr = 0.0004;
    adamw.weight_decay = 0.1;
    optim::AdamW optimizer(model.parameters(), adamw);

    train_model_simple(model, train_loader, val_loader, optimizer, num_epochs, /*eval_freq=*/5,
                       /*eval_iter=*/5, "Every effort moves you", tokenizer);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
