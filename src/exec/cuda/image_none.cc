// Built without the CUDA Toolkit: no kernels embedded.
#include "src/exec/cuda/image.h"

namespace hoccl::cuda {

KernelImage kernelImage() { return KernelImage(); }

}  // namespace hoccl::cuda
