#include "udf/support/hash.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace udf {

namespace {

// SHA-256 fetched from OpenSSL's default provider once per process: with
// EVP_sha256(), every digest fetches it again (a name lookup of ~370k
// instructions, 13% of a udf-link cache hit that hashes 14 times).
const EVP_MD* sha256_md() {
  static const EVP_MD* md = [] {
    const EVP_MD* m = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return m ? m : EVP_sha256();
  }();
  return md;
}

}  // namespace

Sha256 sha256(std::span<const std::uint8_t> data) {
  Sha256 out{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, sha256_md(), nullptr) != 1 || len != out.size())
    throw std::runtime_error("OpenSSL EVP_Digest(sha256) failed");
  return out;
}

std::string to_hex(std::span<const std::uint8_t> data) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(data.size() * 2);
  for (auto b : data) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

Sha256Builder::Sha256Builder() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), sha256_md(), nullptr) != 1)
    throw std::runtime_error("OpenSSL EVP_DigestInit_ex(sha256) failed");
}

Sha256Builder::~Sha256Builder() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

Sha256Builder& Sha256Builder::part(std::span<const std::uint8_t> data) {
  auto* c = static_cast<EVP_MD_CTX*>(ctx_);
  std::uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(data.size()) >> (8 * i));
  if (EVP_DigestUpdate(c, len, sizeof len) != 1 || EVP_DigestUpdate(c, data.data(), data.size()) != 1)
    throw std::runtime_error("OpenSSL EVP_DigestUpdate failed");
  return *this;
}

Sha256 Sha256Builder::finish() {
  Sha256 out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out.data(), &len) != 1)
    throw std::runtime_error("OpenSSL EVP_DigestFinal_ex failed");
  return out;
}

}  // namespace udf
