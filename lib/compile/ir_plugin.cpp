// The entry point of libudf_frontend_ir.so (see ir_frontend.cpp).
#include "ir_internal.h"

extern "C" __attribute__((visibility("default"))) void udf_frontend_ir_compile_v1(
    int kind, const udf::IrSource* src, const udf::UdfMetadata* meta,
    std::optional<udf::Expected<udf::CompileOutput>>* out) {
  out->emplace(kind == 1 ? udf::ir::compile_mlir_impl(*src, *meta) : udf::ir::compile_llvm_ir_impl(*src, *meta));
}
