// The input file of the whole-kernel harnesses (fused_host.cpp, prep_host.cpp, hadamard_host.cpp,
// reconstruct_host.cpp): an int32 header, then parts each from a multiple of 16 bytes
// (tests/host_kernel.py aligned_parts), read into 16-byte aligned memory, as the kernels' vector
// loads expect their arrays to be. Not shipped.
#pragma once
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace escha {
namespace host {

class InputFile {
  public:
    // header_bytes: the header's size (a multiple of 16); the parts follow it
    InputFile(const char* path, size_t header_bytes) {
        std::ifstream f(path, std::ios::binary);
        const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        store_.resize(bytes.size() / 16 + 1);
        std::memcpy(store_.data(), bytes.data(), bytes.size());
        next_ = reinterpret_cast<const char*>(store_.data()) + header_bytes;
    }
    const int* header() const { return reinterpret_cast<const int*>(store_.data()); }
    // the next part, `bytes` long
    const char* part(size_t bytes) {
        const char* q = next_;
        next_ += (bytes + 15) / 16 * 16;
        return q;
    }

  private:
    struct alignas(16) Chunk { unsigned char b[16]; };
    std::vector<Chunk> store_;
    const char* next_;
};

}  // namespace host
}  // namespace escha
