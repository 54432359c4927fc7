// idx.h: read an IDX file (the MNIST format), shared by `classify` and `classify_aoti`.
#pragma once

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace idx {

// [book:read-idx]
// An IDX file (the MNIST format): two zero bytes, a type code (0x08 = unsigned byte), the
// number of dimensions, each dimension as a big-endian 32-bit integer, then the data, row-major.
struct IdxArray {
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline IdxArray read_idx(const std::string& path, size_t expected_dims) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  unsigned char magic[4];
  in.read(reinterpret_cast<char*>(magic), 4);
  if (!in || magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] != expected_dims)
    throw std::runtime_error(path + ": not an unsigned-byte IDX file with " +
                             std::to_string(expected_dims) + " dimensions");
  IdxArray array;
  int64_t count = 1;
  for (size_t d = 0; d < expected_dims; ++d) {
    unsigned char size[4];
    in.read(reinterpret_cast<char*>(size), 4);
    int64_t n = (int64_t{size[0]} << 24) | (size[1] << 16) | (size[2] << 8) | size[3];
    array.shape.push_back(n);
    count *= n;
  }
  array.bytes.resize(count);
  in.read(reinterpret_cast<char*>(array.bytes.data()), count);
  if (!in) throw std::runtime_error(path + ": file is shorter than its header says");
  return array;
}
// [/book:read-idx]

}  // namespace idx
