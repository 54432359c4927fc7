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

#include <ATen/Parallel.h>  // at::set_num_threads
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>

#include "idx.h"  // read_idx: the IDX reader both programs share

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using idx::IdxArray;
using idx::read_idx;

struct Options {
  std::string model, images, labels, output;
  int threads = 0, batch_size = 1000, show = 5, repeat = 1;
};

Options parse(int argc, char** argv) {
  Options opt;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--threads") opt.threads = std::stoi(value());
    else if (arg == "--batch-size") opt.batch_size = std::stoi(value());
    else if (arg == "--repeat") opt.repeat = std::stoi(value());
    else if (arg == "--show") opt.show = std::stoi(value());
    else if (arg == "--output") opt.output = value();
    else if (arg.rfind("--", 0) == 0) throw std::runtime_error("unknown option " + arg);
    else positional.push_back(arg);
  }
  if (positional.size() < 2 || positional.size() > 3 || opt.batch_size < 1 || opt.repeat < 1)
    throw std::runtime_error(
        "usage: classify_aoti MODEL.pt2 IMAGES-idx3-ubyte [LABELS-idx1-ubyte] "
        "[--threads N] [--batch-size N] [--repeat N] [--show N] [--output FILE]");
  opt.model = positional[0];
  opt.images = positional[1];
  if (positional.size() == 3) opt.labels = positional[2];
  return opt;
}

std::string file_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);) parts.push_back(part);
  return parts;
}

int run(const Options& opt) {
  if (opt.threads > 0) at::set_num_threads(opt.threads);

  // [book:aoti-load-and-run]
  // Unzips the package to a temporary folder and dlopen()s the compiled model in it.
  torch::inductor::AOTIModelPackageLoader loader(opt.model);
  std::vector<std::string> classes = split(loader.get_metadata().at("classes"), ',');

  IdxArray images = read_idx(opt.images, 3);
  const int64_t n = images.shape[0];
  torch::Tensor all = torch::from_blob(images.bytes.data(), {n, 1, images.shape[1], images.shape[2]},
                                       torch::kUInt8);

  c10::InferenceMode no_autograd;
  auto forward = [&](const torch::Tensor& batch) {
    // The compiled model takes and returns flat lists of tensors (its call spec says how
    // they map to the Python signature); it expects contiguous inputs.
    return loader.run({batch.contiguous()})[0];
  };
  torch::Tensor first_batch = all.slice(/*dim=*/0, 0, std::min<int64_t>(n, opt.batch_size));
  for (int warm_up = 0; warm_up < 2; ++warm_up) forward(first_batch);
  std::vector<double> pass_seconds;
  torch::Tensor logits;
  for (int pass = 0; pass < opt.repeat; ++pass) {
    std::vector<torch::Tensor> outputs;
    auto start = std::chrono::steady_clock::now();
    for (int64_t first = 0; first < n; first += opt.batch_size)
      outputs.push_back(forward(all.slice(/*dim=*/0, first, std::min(n, first + opt.batch_size))));
    pass_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    logits = torch::cat(outputs);
  }
  torch::Tensor predicted = logits.argmax(/*dim=*/1);
  // [/book:aoti-load-and-run]

  std::printf("model: %s, %zu classes; threads: %d\n", file_name(opt.model).c_str(), classes.size(),
              at::get_num_threads());
  std::printf("images: %lld of %lldx%lld from %s\n", static_cast<long long>(n),
              static_cast<long long>(images.shape[1]), static_cast<long long>(images.shape[2]),
              file_name(opt.images).c_str());
  IdxArray labels;
  if (!opt.labels.empty()) {
    labels = read_idx(opt.labels, 1);
    if (labels.shape[0] != n) throw std::runtime_error("images and labels differ in number");
  }
  auto p = predicted.accessor<int64_t, 1>();
  for (int64_t i = 0; i < std::min<int64_t>(n, opt.show); ++i) {
    std::printf("  image %lld: %-12s", static_cast<long long>(i), classes.at(p[i]).c_str());
    if (!opt.labels.empty()) std::printf(" (label: %s)", classes.at(labels.bytes[i]).c_str());
    std::printf("\n");
  }
  if (!opt.labels.empty()) {
    int64_t correct = 0;
    for (int64_t i = 0; i < n; ++i) correct += p[i] == labels.bytes[i];
    std::printf("accuracy: %.2f%% (%lld of %lld)\n", 100.0 * correct / n,
                static_cast<long long>(correct), static_cast<long long>(n));
  }
  std::sort(pass_seconds.begin(), pass_seconds.end());
  std::printf("forward time: %.1f ms for %lld images (median of %d passes)\n",
              1e3 * pass_seconds[pass_seconds.size() / 2], static_cast<long long>(n), opt.repeat);

  if (!opt.output.empty()) {
    std::FILE* out = std::fopen(opt.output.c_str(), "w");
    if (!out) throw std::runtime_error("cannot write " + opt.output);
    torch::Tensor contiguous = logits.contiguous();
    auto l = contiguous.accessor<float, 2>();
    for (int64_t i = 0; i < n; ++i) {
      std::fprintf(out, "%lld", static_cast<long long>(p[i]));
      for (int64_t k = 0; k < logits.size(1); ++k) std::fprintf(out, ",%.9g", l[i][k]);
      std::fprintf(out, "\n");
    }
    std::fclose(out);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const c10::Error& e) {
    std::cerr << "classify_aoti: " << e.what_without_backtrace() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "classify_aoti: " << e.what() << "\n";
  }
  return 1;
}
