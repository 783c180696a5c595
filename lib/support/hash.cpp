#include "udf/support/hash.h"

// OpenSSL 3 keeps the low-level SHA256_Init/Update/Final (deprecated, not
// removed): they need no provider and no library initialization.  EVP's first
// digest in a process initializes the library (OPENSSL_init_crypto reads
// openssl.cnf, the fetch builds the algorithm name map), a cost a cache hit
// of udf-link or udfc should not pay.  A libcrypto built without the
// deprecated API gets EVP, fetched once per process.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <stdexcept>

#if defined(OPENSSL_NO_DEPRECATED_3_0)
#define UDF_SHA256_EVP 1
#else
#define UDF_SHA256_EVP 0
#endif

namespace udf {

namespace {

#if UDF_SHA256_EVP
// SHA-256 fetched from OpenSSL's default provider once per process: with
// EVP_sha256(), every digest fetches it again (a name lookup per digest,
// and a cache hit hashes many times).
const EVP_MD* sha256_md() {
  static const EVP_MD* md = [] {
    const EVP_MD* m = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return m ? m : EVP_sha256();
  }();
  return md;
}
#endif

}  // namespace

Sha256 sha256(std::span<const std::uint8_t> data) {
  Sha256 out{};
#if UDF_SHA256_EVP
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, sha256_md(), nullptr) != 1 || len != out.size())
    throw std::runtime_error("OpenSSL EVP_Digest(sha256) failed");
#else
  SHA256_CTX c;
  if (SHA256_Init(&c) != 1 || SHA256_Update(&c, data.data(), data.size()) != 1 || SHA256_Final(out.data(), &c) != 1)
    throw std::runtime_error("OpenSSL SHA256 failed");
#endif
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

#if UDF_SHA256_EVP
Sha256Builder::Sha256Builder() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), sha256_md(), nullptr) != 1)
    throw std::runtime_error("OpenSSL EVP_DigestInit_ex(sha256) failed");
}

Sha256Builder::~Sha256Builder() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

namespace {
bool update(void* ctx, const void* p, std::size_t n) { return EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx), p, n) == 1; }
}  // namespace

Sha256 Sha256Builder::finish() {
  Sha256 out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out.data(), &len) != 1)
    throw std::runtime_error("OpenSSL EVP_DigestFinal_ex failed");
  return out;
}
#else
Sha256Builder::Sha256Builder() : ctx_(new SHA256_CTX) {
  if (SHA256_Init(static_cast<SHA256_CTX*>(ctx_)) != 1) {
    delete static_cast<SHA256_CTX*>(ctx_);
    throw std::runtime_error("OpenSSL SHA256_Init failed");
  }
}

Sha256Builder::~Sha256Builder() { delete static_cast<SHA256_CTX*>(ctx_); }

namespace {
bool update(void* ctx, const void* p, std::size_t n) { return SHA256_Update(static_cast<SHA256_CTX*>(ctx), p, n) == 1; }
}  // namespace

Sha256 Sha256Builder::finish() {
  Sha256 out{};
  if (SHA256_Final(out.data(), static_cast<SHA256_CTX*>(ctx_)) != 1) throw std::runtime_error("OpenSSL SHA256_Final failed");
  return out;
}
#endif

Sha256Builder& Sha256Builder::part(std::span<const std::uint8_t> data) {
  std::uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(data.size()) >> (8 * i));
  if (!update(ctx_, len, sizeof len) || !update(ctx_, data.data(), data.size()))
    throw std::runtime_error("OpenSSL SHA-256 update failed");
  return *this;
}

}  // namespace udf
