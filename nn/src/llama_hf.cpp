// nn/src/llama_hf.cpp: Hugging Face Llama checkpoints into LlamaModel (the name map is in
// llama.h), as the book's load_weights_into_llama (ch05/07_gpt_to_llama/standalone-llama32).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "xgrad/nn/llama.h"
#include "xgrad/ops.h"

namespace xgrad::nn {

namespace {
bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
}  // namespace

std::string hf_llama_name(const std::string& hf_name) {
  if (hf_name == "model.embed_tokens.weight") return "tok_emb.weight";
  if (hf_name == "model.norm.weight") return "final_norm.weight";
  if (hf_name == "lm_head.weight") return "out_head.weight";
  if (ends_with(hf_name, ".rotary_emb.inv_freq")) return "";  // the RoPE tables are computed
  // model.layers.<N>.<module>.weight
  constexpr std::string_view layers = "model.layers.";
  if (starts_with(hf_name, layers)) {
    const std::size_t dot = hf_name.find('.', layers.size());
    const std::string layer = hf_name.substr(layers.size(), dot - layers.size());
    const bool digits = !layer.empty() && layer.find_first_not_of("0123456789") == std::string::npos;
    if (digits && dot != std::string::npos) {
      static const std::pair<std::string_view, std::string_view> kModules[] = {
          {"self_attn.q_proj.weight", "att.W_query.weight"},
          {"self_attn.k_proj.weight", "att.W_key.weight"},
          {"self_attn.v_proj.weight", "att.W_value.weight"},
          {"self_attn.o_proj.weight", "att.out_proj.weight"},
          {"mlp.gate_proj.weight", "ff.fc1.weight"},
          {"mlp.up_proj.weight", "ff.fc2.weight"},
          {"mlp.down_proj.weight", "ff.fc3.weight"},
          {"input_layernorm.weight", "norm1.weight"},
          {"post_attention_layernorm.weight", "norm2.weight"},
      };
      const std::string_view rest = std::string_view(hf_name).substr(dot + 1);
      for (const auto& [hf, book] : kModules)
        if (rest == hf) return "trf_blocks." + layer + "." + std::string(book);
    }
  }
  fail("hf_llama_name", "'", hf_name,
       "' is not a tensor of a Hugging Face Llama checkpoint (model.embed_tokens.weight, "
       "model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight)");
}

StateDict llama_state_dict_from_hf(const io::NamedTensors& tensors, const LlamaConfig& cfg) {
  StateDict sd;
  for (const auto& [hf_name, t] : tensors) {
    const std::string name = hf_llama_name(hf_name);
    if (name.empty()) continue;
    if (sd.contains(name)) fail("llama_state_dict_from_hf", "two tensors map to '", name, "'");
    sd.insert(name, t);
  }
  if (sd.contains("tok_emb.weight")) {
    const Tensor& emb = sd.at("tok_emb.weight");
    if (!sd.contains("out_head.weight")) {
      // tied embeddings (no lm_head.weight): the book copies them into the output head
      if (!cfg.tie_weights) sd.insert("out_head.weight", emb);
    } else if (cfg.tie_weights) {
      const Tensor& head = sd.at("out_head.weight");
      if (head.shape() != emb.shape() || head.to_vector<double>() != emb.to_vector<double>())
        fail("llama_state_dict_from_hf",
             "the checkpoint's lm_head.weight differs from model.embed_tokens.weight, but the model ties "
             "them (tie_weights): construct it with tie_weights = false");
    }
  }
  return sd;
}

LoadResult load_hf_llama(LlamaModel& model, const std::filesystem::path& path) {
  return load_hf_llama(model, std::vector<std::filesystem::path>{path});
}

LoadResult load_hf_llama(LlamaModel& model, const std::vector<std::filesystem::path>& shards) {
  io::NamedTensors tensors;
  for (const auto& path : shards) {
    io::SafetensorsFile file = io::load_safetensors(path);
    tensors.insert(tensors.end(), file.tensors.begin(), file.tensors.end());
  }
  return model.load_state_dict(llama_state_dict_from_hf(tensors, model.cfg));
}

}  // namespace xgrad::nn
