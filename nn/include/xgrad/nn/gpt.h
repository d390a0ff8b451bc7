// xgrad/nn/gpt.h: GPTModel, Raschka's ch04 GPT-2 (tok_emb, pos_emb, drop_emb, trf_blocks,
// final_norm, out_head). With the default GPTConfig it has 163,009,536 parameters (the
// output head is not tied to tok_emb, as in the book).
//
//   manual_seed(123);
//   nn::GPTModel model(nn::GPTConfig{});        // same weights as torch's GPTModel(cfg)
//   Tensor logits = model(ids);                  // ids int64 (b, T) -> (b, T, vocab_size)
//
// GPTConfig{.tie_weights = true} shares tok_emb.weight with out_head.weight as GPT-2 does
// (124M: 124,412,160 parameters): one tensor, which receives the gradients of both uses;
// parameters() lists it once (so optimizers step it once and num_parameters() counts it once,
// like torch's sum(p.numel() for p in model.parameters())); state_dict() has both names, as
// torch's does, and load_state_dict() accepts both names or either one.
//
// State dict keys are torch's for the same structure: "tok_emb.weight",
// "trf_blocks.0.att.W_query.weight", "trf_blocks.0.att.mask", "trf_blocks.0.norm1.weight",
// "trf_blocks.0.ff.layers.0.weight", ..., "final_norm.bias", "out_head.weight" (see
// transformer.h for the LayerNorm naming).
#pragma once
#include <cstdint>
#include <memory>

#include "xgrad/nn/containers.h"
#include "xgrad/nn/layers.h"
#include "xgrad/nn/linear.h"
#include "xgrad/nn/module.h"
#include "xgrad/nn/transformer.h"

namespace xgrad::nn {

class GPTModel : public Module {
 public:
  explicit GPTModel(const GPTConfig& cfg = GPTConfig{});
  // in_idx int64 (b, T), T <= context_length, ids in [0, vocab_size) -> logits (b, T, vocab).
  Tensor forward(const Tensor& in_idx) override;

  GPTConfig cfg;
  ModuleHolder<Embedding> tok_emb;
  ModuleHolder<Embedding> pos_emb;
  ModuleHolder<Dropout> drop_emb;
  ModuleHolder<Sequential> trf_blocks;  // of TransformerBlock: trf_blocks->at<TransformerBlock>(0)
  ModuleHolder<LayerNorm> final_norm;
  ModuleHolder<Linear> out_head;
};

}  // namespace xgrad::nn
