// classify_aoti: classify Fashion-MNIST test images in C++ with an AOTInductor package, the
// supported path from torch.export to C++ (`torch._inductor.aoti_compile_and_package` in Python).
//
//   classify_aoti MODEL.pt2 IMAGES-idx3-ubyte [LABELS-idx1-ubyte] [options]
//     --threads N      intra-op threads (default: libtorch's choice)
//     --batch-size N   images per forward call (default 1000)
//     --repeat N       time N passes over all images after the warm-up (default 1)
//     --show N         print the first N predictions (default 5)
//     --output FILE    write one CSV line per image: predicted class, then the 10 logits
//
// The package holds compiled C++ (a shared library Inductor generated for this model), its
// weights and metadata; no Python and no TorchScript interpreter is involved. As for `classify`,
// the images go in as raw uint8 bytes [N, 1, 28, 28] and the model does its own normalization.
// The class names come from the package's metadata (key "classes", comma-separated).

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include "classify_common.h"  // options, the timed batch loop and the report, shared with classify

#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);) parts.push_back(part);
  return parts;
}

int run(const classify::Options& opt) {
  if (opt.threads > 0) at::set_num_threads(opt.threads);

  // [book:aoti-load-and-run]
  // Unzips the package to a temporary folder and dlopen()s the compiled model in it.
  torch::inductor::AOTIModelPackageLoader loader(opt.model);
  std::vector<std::string> classes = split(loader.get_metadata().at("classes"), ',');

  idx::IdxArray images = idx::read_idx(opt.images, 3);
  auto forward = [&](const torch::Tensor& batch) {
    // The compiled model takes and returns flat lists of tensors (its call spec says how
    // they map to the Python signature); it expects contiguous inputs.
    return loader.run({batch.contiguous()})[0];
  };
  classify::Result result = classify::run_in_batches(classify::as_tensor(images), opt, forward);
  // [/book:aoti-load-and-run]
  return classify::report(opt, classes, images, result);
}

}  // namespace

int main(int argc, char** argv) {
  return classify::guarded_main(
      "classify_aoti", [&] { return run(classify::parse(argc, argv, "classify_aoti", "MODEL.pt2")); });
}
