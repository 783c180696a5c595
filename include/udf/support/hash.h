// SHA-256 through OpenSSL's libcrypto; hex rendering.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace udf {

using Sha256 = std::array<std::uint8_t, 32>;

Sha256 sha256(std::span<const std::uint8_t> data);
inline Sha256 sha256(std::string_view s) {
  return sha256(std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
}
std::string to_hex(std::span<const std::uint8_t> data);
inline std::string sha256_hex(std::span<const std::uint8_t> d) { return to_hex(sha256(d)); }
inline std::string sha256_hex(std::string_view s) { return to_hex(sha256(s)); }

/// Incremental SHA-256 for keys built from several parts.  Each part is
/// length-prefixed, so ("ab","c") and ("a","bc") give different digests.
class Sha256Builder {
 public:
  Sha256Builder();
  ~Sha256Builder();
  Sha256Builder(const Sha256Builder&) = delete;
  Sha256Builder& operator=(const Sha256Builder&) = delete;
  Sha256Builder& part(std::span<const std::uint8_t> data);
  Sha256Builder& part(std::string_view s) {
    return part(std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
  }
  Sha256 finish();
  std::string finish_hex() { return to_hex(finish()); }

 private:
  void* ctx_;
};

}  // namespace udf
