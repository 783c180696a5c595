// DLPack and Arrow C Device exports for the runtime
// (include/udf/runtime_interop.h): tensors allocated for a caller (host or
// device memory, freed through their deleter or release callback) and the
// search over tensors given in either form.
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "capi/api_guard.h"
#include "capi/interop_internal.h"

// ------------------------------------------------------------- exports

namespace {

using namespace udf_interop;

struct OwnedBuffer {
  void* host = nullptr;
  DeviceBuffer dev;
  bool on_device = false;
  void* data() const { return on_device ? reinterpret_cast<void*>(dev.ptr) : host; }
  void free_now() {
    if (on_device) device_free(dev);
    else std::free(host);
    host = nullptr;
    dev = {};
  }
};

udf_status alloc_buffer(int32_t device, udf_dtype dtype, int64_t rows, int64_t cols, OwnedBuffer& out) {
  if (esize(dtype) == 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "dtype: unknown value " + std::to_string(dtype));
  if (rows < 0 || cols < 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "rows and cols must not be negative");
  if (cols > 0 && rows > INT64_MAX / cols / 8) return fail(UDF_ERROR_INVALID_ARGUMENT, "rows x cols overflows");
  size_t bytes = static_cast<size_t>(rows * cols) * esize(dtype);
  if (device == UDF_HOST_DEVICE) {
    out.on_device = false;
    out.host = std::malloc(bytes ? bytes : 1);
    if (!out.host) return fail(UDF_ERROR_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    return UDF_OK;
  }
  if (device < 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "device must be UDF_HOST_DEVICE (-1) or a CUDA ordinal");
  out.on_device = true;
  return device_alloc(device, bytes, out.dev);
}

struct DlExport {
  DLManagedTensor t{};
  int64_t shape[2]{};
  OwnedBuffer buf;
};

void dl_export_deleter(DLManagedTensor* self) {
  auto* e = static_cast<DlExport*>(self->manager_ctx);
  e->buf.free_now();
  delete e;
}

struct ArrowExport {
  OwnedBuffer buf;
  const void* buffers[2] = {nullptr, nullptr};
  const void* list_buffers[1] = {nullptr};
  ArrowArray child{};
  ArrowArray* children[1] = {nullptr};
};

void arrow_child_release(ArrowArray* a) { a->release = nullptr; }

void arrow_export_release(ArrowArray* a) {
  auto* e = static_cast<ArrowExport*>(a->private_data);
  if (a->n_children == 1 && e->child.release) e->child.release(&e->child);
  e->buf.free_now();
  delete e;
  a->release = nullptr;
}

struct SchemaExport {
  std::string format;
  ArrowSchema child{};
  ArrowSchema* children[1] = {nullptr};
};

void schema_child_release(ArrowSchema* s) { s->release = nullptr; }

void schema_release(ArrowSchema* s) {
  auto* e = static_cast<SchemaExport*>(s->private_data);
  if (s->n_children == 1 && e->child.release) e->child.release(&e->child);
  delete e;
  s->release = nullptr;
}

udf_tensor view_of_buffer(const OwnedBuffer& b, int32_t device, udf_dtype dtype, int64_t rows, int64_t cols) {
  return udf_tensor{b.data(), device, dtype, rows, cols, 0};
}

}  // namespace

extern "C" UDF_API udf_status udf_tensor_alloc_dlpack(int32_t device, udf_dtype dtype, int64_t rows, int64_t cols,
                                                      DLManagedTensor** out, udf_tensor* view) {
  if (!out) return fail(UDF_ERROR_INVALID_ARGUMENT, "out must not be NULL");
  *out = nullptr;
  auto* e = new (std::nothrow) DlExport;
  if (!e) return fail(UDF_ERROR_OUT_OF_MEMORY, "out of host memory");
  if (udf_status s = alloc_buffer(device, dtype, rows, cols, e->buf); s != UDF_OK) {
    delete e;
    return s;
  }
  e->shape[0] = rows;
  e->shape[1] = cols;
  DLTensor& t = e->t.dl_tensor;
  t.data = e->buf.data();
  t.device = device == UDF_HOST_DEVICE ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, device};
  t.ndim = 2;
  t.dtype = to_dl(dtype);
  t.shape = e->shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  e->t.manager_ctx = e;
  e->t.deleter = dl_export_deleter;
  if (view) *view = view_of_buffer(e->buf, device, dtype, rows, cols);
  *out = &e->t;
  return UDF_OK;
}

extern "C" UDF_API udf_status udf_tensor_alloc_arrow(int32_t device, udf_dtype dtype, int64_t rows, int64_t cols,
                                                     int32_t as_list, ArrowDeviceArray* out, ArrowSchema* schema,
                                                     udf_tensor* view) {
  if (!out || !schema) return fail(UDF_ERROR_INVALID_ARGUMENT, "out and schema must not be NULL");
  std::memset(out, 0, sizeof *out);
  std::memset(schema, 0, sizeof *schema);
  if (!as_list && cols != 1) return fail(UDF_ERROR_INVALID_ARGUMENT, "a plain (non-list) Arrow array needs cols = 1");
  if (as_list && cols <= 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "a fixed-size list needs cols >= 1");
  auto* e = new (std::nothrow) ArrowExport;
  auto* se = new (std::nothrow) SchemaExport;
  if (!e || !se) {
    delete e;
    delete se;
    return fail(UDF_ERROR_OUT_OF_MEMORY, "out of host memory");
  }
  if (udf_status s = alloc_buffer(device, dtype, rows, cols, e->buf); s != UDF_OK) {
    delete e;
    delete se;
    return s;
  }
  e->buffers[0] = nullptr;  // no validity bitmap: no nulls
  e->buffers[1] = e->buf.data();
  ArrowArray& a = out->array;
  if (as_list) {
    e->child = ArrowArray{rows * cols, 0, 0, 2, 0, e->buffers, nullptr, nullptr, arrow_child_release, nullptr};
    e->children[0] = &e->child;
    a = ArrowArray{rows, 0, 0, 1, 1, e->list_buffers, e->children, nullptr, arrow_export_release, e};
    se->format = "+w:" + std::to_string(cols);
    se->child = ArrowSchema{arrow_format(dtype), "item", nullptr, 0, 0, nullptr, nullptr, schema_child_release, nullptr};
    se->children[0] = &se->child;
    *schema = ArrowSchema{se->format.c_str(), "", nullptr, 0, 1, se->children, nullptr, schema_release, se};
  } else {
    a = ArrowArray{rows, 0, 0, 2, 0, e->buffers, nullptr, nullptr, arrow_export_release, e};
    se->format = arrow_format(dtype);
    *schema = ArrowSchema{se->format.c_str(), "", nullptr, 0, 0, nullptr, nullptr, schema_release, se};
  }
  out->device_type = device == UDF_HOST_DEVICE ? ARROW_DEVICE_CPU : ARROW_DEVICE_CUDA;
  out->device_id = device == UDF_HOST_DEVICE ? -1 : device;
  out->sync_event = nullptr;  // the buffer is ready: every runtime call is synchronous
  if (view) *view = view_of_buffer(e->buf, device, dtype, as_list ? rows : 1, as_list ? cols : rows);
  return UDF_OK;
}

extern "C" UDF_API udf_status udf_index_search_dlpack(udf_index* ix, const udf_tensor* queries,
                                                      const udf_search_params* params, int32_t device,
                                                      DLManagedTensor** distances, DLManagedTensor** ids) {
  if (!distances || !ids) return fail(UDF_ERROR_INVALID_ARGUMENT, "distances and ids must not be NULL");
  *distances = *ids = nullptr;
  if (!queries || !params) return fail(UDF_ERROR_INVALID_ARGUMENT, "queries and params must not be NULL");
  udf_tensor dv{}, iv{};
  DLManagedTensor *d = nullptr, *i = nullptr;
  if (udf_status s = udf_tensor_alloc_dlpack(device, UDF_DTYPE_F32, queries->rows, params->k, &d, &dv); s != UDF_OK) return s;
  if (udf_status s = udf_tensor_alloc_dlpack(device, UDF_DTYPE_I64, queries->rows, params->k, &i, &iv); s != UDF_OK) {
    d->deleter(d);
    return s;
  }
  if (udf_status s = udf_index_search(ix, queries, params, &dv, &iv); s != UDF_OK) {
    d->deleter(d);
    i->deleter(i);
    return s;
  }
  *distances = d;
  *ids = i;
  return UDF_OK;
}

extern "C" UDF_API udf_status udf_index_search_arrow(udf_index* ix, const udf_tensor* queries,
                                                     const udf_search_params* params, int32_t device,
                                                     ArrowDeviceArray* distances, ArrowSchema* distances_schema,
                                                     ArrowDeviceArray* ids, ArrowSchema* ids_schema) {
  if (!distances || !distances_schema || !ids || !ids_schema)
    return fail(UDF_ERROR_INVALID_ARGUMENT, "distances, ids and their schemas must not be NULL");
  std::memset(distances, 0, sizeof *distances);
  std::memset(ids, 0, sizeof *ids);
  std::memset(distances_schema, 0, sizeof *distances_schema);
  std::memset(ids_schema, 0, sizeof *ids_schema);
  if (!queries || !params) return fail(UDF_ERROR_INVALID_ARGUMENT, "queries and params must not be NULL");
  if (params->k == 0) return fail(UDF_ERROR_INVALID_ARGUMENT, "k must be at least 1");
  udf_tensor dv{}, iv{};
  ArrowDeviceArray d{}, i{};
  ArrowSchema ds{}, is{};
  if (udf_status s = udf_tensor_alloc_arrow(device, UDF_DTYPE_F32, queries->rows, params->k, 1, &d, &ds, &dv); s != UDF_OK)
    return s;
  if (udf_status s = udf_tensor_alloc_arrow(device, UDF_DTYPE_I64, queries->rows, params->k, 1, &i, &is, &iv); s != UDF_OK) {
    d.array.release(&d.array);
    ds.release(&ds);
    return s;
  }
  if (udf_status s = udf_index_search(ix, queries, params, &dv, &iv); s != UDF_OK) {
    d.array.release(&d.array);
    ds.release(&ds);
    i.array.release(&i.array);
    is.release(&is);
    return s;
  }
  *distances = d;
  *distances_schema = ds;
  *ids = i;
  *ids_schema = is;
  return UDF_OK;
}

