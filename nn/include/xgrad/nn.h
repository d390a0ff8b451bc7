// <xgrad/nn.h>: the module system and layers (namespace xgrad::nn). Included by <xgrad/xgrad.h>.
//
//   module.h       Module, StateDict: parameters, buffers, children, state_dict, printing
//   containers.h   ModuleList, Sequential
//   init.h         nn::init::kaiming_uniform_, normal_, xavier_uniform_, ...
//   linear.h       Linear
//   layers.h       Dropout, Embedding, LayerNorm, GELU, ReLU, Identity
//   attention.h    SelfAttention, CausalAttention, MultiHeadAttentionWrapper, MultiHeadAttention,
//                  MHLinear
//   transformer.h  GPTConfig, FeedForward, TransformerBlock
//   sampling.h     SamplingOptions, sample_token: the next token from a row of logits
//   gpt.h          GPTModel, KVCache, GPTModel::generate
//   llama_layers.h SiLU, RMSNorm, LlamaFeedForward (SwiGLU)
//   rope.h         RoPEFreqConfig, RoPEParams, compute_rope_params, apply_rope
//   llama.h        LlamaConfig, GroupedQueryAttention, LlamaTransformerBlock, LlamaModel,
//                  load_hf_llama (Hugging Face checkpoints)
//   loss.h         CrossEntropyLoss, MSELoss
//   clip_grad.h    nn::utils::clip_grad_norm_, clip_grad_value_
#pragma once
#include "xgrad/nn/attention.h"
#include "xgrad/nn/clip_grad.h"
#include "xgrad/nn/containers.h"
#include "xgrad/nn/gpt.h"
#include "xgrad/nn/init.h"
#include "xgrad/nn/layers.h"
#include "xgrad/nn/linear.h"
#include "xgrad/nn/llama.h"
#include "xgrad/nn/llama_layers.h"
#include "xgrad/nn/loss.h"
#include "xgrad/nn/module.h"
#include "xgrad/nn/rope.h"
#include "xgrad/nn/sampling.h"
#include "xgrad/nn/transformer.h"
