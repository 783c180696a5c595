// A file compiles into an artifact; --inspect prints its manifest.  %udfc
// validates both against schemas/udf-artifact-v1.schema.json.
// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %s %t/squared_l2.cu
// RUN: %udfc %t/squared_l2.cu -o %t/a.udfa --arch sm_90 2>&1 | FileCheck --allow-empty --implicit-check-not={{.}} %s
// RUN: %udfc --inspect %t/a.udfa | FileCheck --check-prefix=MANIFEST --match-full-lines %s

// MANIFEST:      {
// MANIFEST-NEXT:   "abi": {
// MANIFEST-NEXT:     "id": "ivf_flat.metric.v1",
// MANIFEST-NEXT:     "version": 1
// MANIFEST-NEXT:   },
// MANIFEST-NEXT:   "accumulator_type": "f32",
// MANIFEST-NEXT:   "cache_key": "{{([0-9a-f]{64})}}",
// MANIFEST-NEXT:   "captures": [],
// MANIFEST-NEXT:   "coarse_metric": "l2",
// MANIFEST-NEXT:   "element_type": "f32",
// MANIFEST-NEXT:   "finalize": null,
// MANIFEST-NEXT:   "initial": 0.0,
// MANIFEST-NEXT:   "kind": "udf.artifact",
// MANIFEST-NEXT:   "order": "min",
// MANIFEST-NEXT:   "payload_kind": "lto-ir",
// MANIFEST-NEXT:   "source": {
// MANIFEST-NEXT:     "kind": "cuda",
// MANIFEST-NEXT:     "name": "squared_l2.cu",
// MANIFEST-NEXT:     "sha256": "{{([0-9a-f]{64})}}"
// MANIFEST-NEXT:   },
// MANIFEST-NEXT:   "symbol": "squared_l2",
// MANIFEST-NEXT:   "targets": [
// MANIFEST-NEXT:     {
// MANIFEST-NEXT:       "arch": "sm_90",
// MANIFEST-NEXT:       "sha256": "{{([0-9a-f]{64})}}",
// MANIFEST-NEXT:       "size": {{[1-9][0-9]*}}
// MANIFEST-NEXT:     }
// MANIFEST-NEXT:   ],
// MANIFEST-NEXT:   "toolchain": {
// MANIFEST-NEXT:     "compiler": "nvrtc {{[0-9]+\.[0-9]+}}",
// MANIFEST-NEXT:     "options": [
// MANIFEST-NEXT:       "-rdc=true",
// MANIFEST-NEXT:       "-std=c++17",
// MANIFEST-NEXT:       "--pre-include=udf_prelude.h",
// MANIFEST-NEXT:       "-dlto"
// MANIFEST-NEXT:     ],
// MANIFEST-NEXT:     "udfc": "{{[0-9]+\.[0-9]+\.[0-9]+}}"
// MANIFEST-NEXT:   },
// MANIFEST-NEXT:   "udf_kind": "metric",
// MANIFEST-NEXT:   "version": {
// MANIFEST-NEXT:     "major": 1,
// MANIFEST-NEXT:     "minor": 5
// MANIFEST-NEXT:   }
// MANIFEST-NEXT: }
// MANIFEST-EMPTY:

// The artifact is a plain data file, as `cp` would make it (umask 022 by default).
// RUN: %python -c "import os, stat, sys; m = stat.S_IMODE(os.stat(sys.argv[1]).st_mode); print(oct(m & 0o111))" %t/a.udfa \
// RUN:   | FileCheck --check-prefix=MODE %s
// MODE: 0o0

extern "C" __device__ float squared_l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + d * d;
}
