// The AVX-512 instance of the attention backward body (attention_backward_impl.h): 16 keys
// per vector, lane masks for the causal and window edges, scalef-based e^x.
#include "lmstack/kernels/attention_backward_impl.h"

namespace lmstack::kernels {

void attention_backward_item_avx512(const AttentionBackwardItem& item) {
  backward_item<VecAvx512>(item);
}

}  // namespace lmstack::kernels
