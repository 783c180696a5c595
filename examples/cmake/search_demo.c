/* A C program on udf::runtime: loads the module this project linked, builds
 * an IVF-Flat index over random vectors with each of its metrics, and checks
 * that every query (a stored vector) finds itself first.  Without a GPU it
 * says why it cannot search, and exits 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <udf/runtime.h>

#define N 4096
#define DIM 32
#define NQ 8
#define K 4

static int fail(const char *what, udf_status s) {
  fprintf(stderr, "search_demo: %s: %s: %s\n", what, udf_status_name(s), udf_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : UDF_DEMO_MODULE;
  udf_runtime *rt = NULL;
  udf_status s = udf_runtime_create(0, &rt);
  if (s == UDF_ERROR_NO_DRIVER || s == UDF_ERROR_NO_DEVICE) {
    printf("udf runtime API %u: cannot search here: %s: %s\n", (unsigned)udf_runtime_api_version(), udf_status_name(s),
           udf_last_error());
    return 0;
  }
  if (s != UDF_OK) return fail("udf_runtime_create", s);
  udf_module *mod = NULL;
  if ((s = udf_module_load_file(rt, path, &mod)) != UDF_OK) return fail(path, s);
  size_t n_metrics = 0;
  udf_module_metric_count(mod, &n_metrics);

  static float data[N * DIM], weights[DIM], dist[NQ * K];
  static int64_t ids[NQ * K];
  srand(7);
  for (int i = 0; i < N * DIM; ++i) data[i] = (float)rand() / RAND_MAX;
  for (int j = 0; j < DIM; ++j) weights[j] = 0.5f + (float)j / DIM;
  udf_tensor dv = {data, UDF_HOST_DEVICE, UDF_DTYPE_F32, N, DIM, 0};
  udf_tensor qv = {data, UDF_HOST_DEVICE, UDF_DTYPE_F32, NQ, DIM, 0}; /* the first NQ stored vectors */
  udf_tensor wv = {weights, UDF_HOST_DEVICE, UDF_DTYPE_F32, 1, DIM, 0};
  udf_tensor dt = {dist, UDF_HOST_DEVICE, UDF_DTYPE_F32, NQ, K, 0};
  udf_tensor it = {ids, UDF_HOST_DEVICE, UDF_DTYPE_I64, NQ, K, 0};
  int bad = 0;
  for (size_t m = 0; m < n_metrics; ++m) {
    udf_metric_info info;
    udf_module_metric_info(mod, m, &info);
    udf_index_params ip;
    udf_index_params_default(&ip);
    ip.n_lists = 16;
    udf_index *ix = NULL;
    if ((s = udf_index_build(mod, info.symbol, &dv, NULL, &ip, &ix)) != UDF_OK) return fail("udf_index_build", s);
    udf_capture_binding cap = {"weights", &wv, 0.0f, 0};
    udf_search_params sp;
    udf_search_params_default(&sp);
    sp.k = K;
    sp.n_probes = 16;
    sp.captures = info.n_captures ? &cap : NULL;
    sp.n_captures = info.n_captures;
    if ((s = udf_index_search(ix, &qv, &sp, &dt, &it)) != UDF_OK) return fail("udf_index_search", s);
    for (int q = 0; q < NQ; ++q) bad += ids[q * K] != q || fabsf(dist[q * K]) > 1e-5f;
    printf("%s: query 0 -> ids %lld %lld %lld %lld, distances %.4f %.4f %.4f %.4f\n", info.symbol, (long long)ids[0],
           (long long)ids[1], (long long)ids[2], (long long)ids[3], dist[0], dist[1], dist[2], dist[3]);
    udf_index_destroy(ix);
  }
  udf_module_destroy(mod);
  udf_runtime_destroy(rt);
  printf("%s\n", bad ? "FAILED: a query did not find itself first" : "every query found itself first");
  return bad ? 1 : 0;
}
