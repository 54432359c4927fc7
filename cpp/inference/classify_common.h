// classify_common.h: what `classify` (TorchScript) and `classify_aoti` (AOTInductor) share: the
// command line, running a model over all images in timed batches, and the report. The two
// programs differ only in how they load and call the model.
#pragma once

#include <ATen/Parallel.h>  // at::set_num_threads, at::get_num_threads
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <torch/types.h>

#include "idx.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace classify {

struct Options {
  std::string model, images, labels, output;
  int threads = 0, batch_size = 1000, show = 5, repeat = 1;
};

// `program` and `model_file` only shape the usage message.
inline Options parse(int argc, char** argv, const std::string& program, const std::string& model_file) {
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
        "usage: " + program + " " + model_file + " IMAGES-idx3-ubyte [LABELS-idx1-ubyte] "
        "[--threads N] [--batch-size N] [--repeat N] [--show N] [--output FILE]");
  opt.model = positional[0];
  opt.images = positional[1];
  if (positional.size() == 3) opt.labels = positional[2];
  return opt;
}

inline std::string file_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// A view of the image bytes as a uint8 tensor [N, 1, rows, cols]; from_blob does not copy, so
// `images` must outlive the tensor.
inline torch::Tensor as_tensor(idx::IdxArray& images) {
  return torch::from_blob(images.bytes.data(), {images.shape[0], 1, images.shape[1], images.shape[2]},
                          torch::kUInt8);
}

struct Result {
  torch::Tensor logits, predicted;
  std::vector<double> pass_seconds;  // one pass = all images once; the median is reported
};

// [book:run-in-batches]
// The first calls set up the CPU kernels (and, for TorchScript, profile and optimize the graph):
// warm up on one batch before timing, as a server would; then time `repeat` passes.
template <class Forward>
Result run_in_batches(const torch::Tensor& all, const Options& opt, Forward&& forward) {
  const int64_t n = all.size(0);
  c10::InferenceMode no_autograd;  // inference only: no graph recording, no version counters
  torch::Tensor first_batch = all.slice(/*dim=*/0, 0, std::min<int64_t>(n, opt.batch_size));
  for (int warm_up = 0; warm_up < 2; ++warm_up) forward(first_batch);
  Result result;
  for (int pass = 0; pass < opt.repeat; ++pass) {
    std::vector<torch::Tensor> outputs;
    auto start = std::chrono::steady_clock::now();
    for (int64_t first = 0; first < n; first += opt.batch_size)
      outputs.push_back(forward(all.slice(/*dim=*/0, first, std::min(n, first + opt.batch_size))));
    result.pass_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    result.logits = torch::cat(outputs);
  }
  result.predicted = result.logits.argmax(/*dim=*/1);
  return result;
}
// [/book:run-in-batches]

// Prints the model, the images, the first predictions, the accuracy (with labels) and the median
// time; writes one CSV line per image (class, then the logits, exact float32) with --output.
inline int report(const Options& opt, const std::vector<std::string>& classes,
                  const idx::IdxArray& images, Result& result) {
  const int64_t n = images.shape[0];
  std::printf("model: %s, %zu classes; threads: %d\n", file_name(opt.model).c_str(), classes.size(),
              at::get_num_threads());
  std::printf("images: %lld of %lldx%lld from %s\n", static_cast<long long>(n),
              static_cast<long long>(images.shape[1]), static_cast<long long>(images.shape[2]),
              file_name(opt.images).c_str());
  idx::IdxArray labels;
  if (!opt.labels.empty()) {
    labels = idx::read_idx(opt.labels, 1);
    if (labels.shape[0] != n) throw std::runtime_error("images and labels differ in number");
  }
  auto p = result.predicted.accessor<int64_t, 1>();
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
  std::vector<double> seconds = result.pass_seconds;
  std::sort(seconds.begin(), seconds.end());
  std::printf("forward time: %.1f ms for %lld images (median of %d passes)\n",
              1e3 * seconds[seconds.size() / 2], static_cast<long long>(n), opt.repeat);

  if (!opt.output.empty()) {
    std::FILE* out = std::fopen(opt.output.c_str(), "w");
    if (!out) throw std::runtime_error("cannot write " + opt.output);
    torch::Tensor logits = result.logits.contiguous();
    auto l = logits.accessor<float, 2>();
    for (int64_t i = 0; i < n; ++i) {
      std::fprintf(out, "%lld", static_cast<long long>(p[i]));
      for (int64_t k = 0; k < logits.size(1); ++k) std::fprintf(out, ",%.9g", l[i][k]);
      std::fprintf(out, "\n");
    }
    std::fclose(out);
  }
  return 0;
}

// Runs `run` and turns any error into one line on stderr and exit status 1.
template <class Run>
int guarded_main(const std::string& program, Run&& run) {
  try {
    return run();
  } catch (const c10::Error& e) {  // libtorch's errors: a bad archive, a shape mismatch, ...
    std::cerr << program << ": " << e.what_without_backtrace() << "\n";
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << "\n";
  }
  return 1;
}

}  // namespace classify
