// classify: classify Fashion-MNIST test images in C++ with a TorchScript model saved from Python.
//
//   classify MODEL.pt IMAGES-idx3-ubyte [LABELS-idx1-ubyte] [options]
//     --threads N      intra-op threads (default: libtorch's choice)
//     --batch-size N   images per forward call (default 1000)
//     --repeat N       time N passes over all images after the warm-up (default 1)
//     --show N         print the first N predictions (default 5)
//     --output FILE    write one CSV line per image: predicted class, then the 10 logits
//
// The images go in as raw bytes, a uint8 tensor of shape [N, 1, 28, 28]: the model itself
// scales and normalizes them (see the chapter "From data to deployment"), so this program
// cannot drift from the preprocessing used in training. The class names come from the model
// too, from its `classes` attribute.

#include <torch/script.h>

#include "classify_common.h"  // options, the timed batch loop and the report, shared with classify_aoti

#include <string>
#include <vector>

namespace {

int run(const classify::Options& opt) {
  if (opt.threads > 0) at::set_num_threads(opt.threads);

  // [book:load-and-run]
  torch::jit::Module model = torch::jit::load(opt.model);  // the archive Python's .save() wrote
  model.eval();
  std::vector<std::string> classes;
  for (const auto& name : model.attr("classes").toListRef()) classes.push_back(name.toStringRef());

  idx::IdxArray images = idx::read_idx(opt.images, 3);
  auto forward = [&](const torch::Tensor& batch) { return model.forward({batch}).toTensor(); };
  classify::Result result = classify::run_in_batches(classify::as_tensor(images), opt, forward);
  // [/book:load-and-run]
  return classify::report(opt, classes, images, result);
}

}  // namespace

int main(int argc, char** argv) {
  return classify::guarded_main(
      "classify", [&] { return run(classify::parse(argc, argv, "classify", "MODEL.pt")); });
}
