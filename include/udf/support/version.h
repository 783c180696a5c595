#pragma once
namespace udf {
inline constexpr const char* kUdfVersion = "0.1.0";
}
