// The index kernels' fatbin (kernels/ivf_index_v1.cu built by nvcc), embedded
// so that the runtime needs no data file.  16-byte aligned, as the driver wants.
__asm__(".section .rodata\n"
        ".balign 16\n"
        ".globl udf_ivf_index_v1_fatbin\n"
        ".hidden udf_ivf_index_v1_fatbin\n"
        "udf_ivf_index_v1_fatbin:\n"
        ".incbin \"" UDF_INDEX_FATBIN "\"\n"
        ".byte 0\n"
        ".previous\n");
