//===- Defaults.cpp - sanitizer options built into every executable -------===//
//
// Linked into every executable of a FG_SANITIZE build (CMakeLists.txt), so
// ctest, the lit tests and the fuzzers run with the same options without
// any environment; ASAN_OPTIONS / UBSAN_OPTIONS / LSAN_OPTIONS still
// override them. On a machine with a CUDA device add protect_shadow_gap=0
// to ASAN_OPTIONS (the CUDA driver maps memory where ASan's gap is).
//
//===----------------------------------------------------------------------===//

extern "C" {

// handle_abort: a failed assert prints its stack too.
const char *__asan_default_options() { return "handle_abort=1:detect_leaks=1"; }

const char *__ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

// Leaks inside the closed-source CUDA libraries (NVRTC, cuBLAS, cudart) are theirs.
const char *__lsan_default_suppressions() {
  return "leak:libnvrtc\n"
         "leak:libnvrtc-builtins\n"
         "leak:libcublas\n"
         "leak:libcublasLt\n"
         "leak:libcudart\n";
}

} // extern "C"
