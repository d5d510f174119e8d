#include "src/model/gpt_config.h"

namespace trident::model {

int pad_vocab(int vocab, int multiple) { return (vocab + multiple - 1) / multiple * multiple; }

namespace {
int64_t block_parameters(int64_t c) {
  // ln1 (2C) + qkv (3C*C + 3C) + proj (C*C + C) + ln2 (2C) + fc (4C*C + 4C) + fc proj (4C*C + C)
  return 12 * c * c + 13 * c;
}
}  // namespace

int64_t GptConfig::parameter_count() const {
  const int64_t c = hidden;
  return static_cast<int64_t>(padded_vocab) * c + static_cast<int64_t>(context) * c +
         layers * block_parameters(c) + 2 * c;
}

int64_t GptConfig::matmul_parameter_count() const {
  const int64_t c = hidden;
  return layers * 12 * c * c + static_cast<int64_t>(vocab) * c;
}

double GptConfig::flops_per_token(int seq_len) const {
  return 6.0 * static_cast<double>(matmul_parameter_count()) +
         6.0 * layers * static_cast<double>(seq_len) * hidden;
}

}  // namespace trident::model
