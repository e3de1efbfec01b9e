// Start-up settings for the AddressSanitizer runtime, compiled into Duet's
// executables: the CLI and the test programs (DUET_SANITIZER_DEFAULTS in the
// top-level CMakeLists.txt).
// In a build without AddressSanitizer this file is empty.
//
// intercept_tls_get_addr=0 — why:
//
// A library that is dlopen'ed (a plugin, and what it pulls in, such as
// libdnnl) keeps its thread_local variables in "dynamic TLS": glibc
// allocates each thread's block with malloc the first time the thread calls
// __tls_get_addr for that library. The sanitizer runtime intercepts
// __tls_get_addr to record each block, so that LeakSanitizer can scan it at
// exit. To learn a block's bounds, the runtime that comes with GCC 12 (and
// other releases made before upstream replaced the guess) guesses: a block
// whose address is 16 bytes past a page boundary is taken for a block of an
// old glibc, which put a header in front of it, and the two words before it
// are read as the block's length and start. glibc 2.25 and later put no such
// header there; under ASan those 16 bytes are the malloc chunk's own header,
// so the "start" is an allocation-stack id (a small number such as 0x3d8) and
// the "length" is ~150 GB. When LeakSanitizer then scans the threads still
// alive at exit, its tracer reads that range and dies with
//   Tracer caught signal 11: addr=0x3e0 ...
//   LeakSanitizer has encountered a fatal error.
// after every test of the process has passed. Whether a block starts 16 bytes
// into a page is an accident of the heap layout: in
// backend_conformance_test it was libdnnl's block on the main thread, a
// 36-byte request that ASan serves from its 64-byte chunks, and it moved on
// or off a page start with the length of argv[0], which googletest copies
// into a chunk of the same size class (so the binary passed when started as
// ./build-asan/tests/backend_conformance_test and failed when started the way
// ctest starts it). See https://github.com/google/sanitizers/issues/1322.
//
// Turning the interception off removes the guess and loses no leak checking
// on glibc 2.25 and later: dynamic TLS blocks are malloc'ed from ld.so, and
// LeakSanitizer treats what ld.so allocates as reachable and scans it
// (use_ld_allocations, on by default). tests/dynamic_tls_exit_test.cc
// arranges the crash and checks both halves.
//
// ASAN_OPTIONS in the environment is read after these defaults, so
// ASAN_OPTIONS=intercept_tls_get_addr=1 brings the interception back.

#if defined(__SANITIZE_ADDRESS__)
#define DUET_WITH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DUET_WITH_ASAN 1
#endif
#endif

#if defined(DUET_WITH_ASAN)
// Looked up by the runtime in the executable (the runtime's own definition
// is weak); it runs before the runtime is initialised, so it only returns a
// literal.
extern "C" __attribute__((visibility("default"), used)) const char* __asan_default_options() {
  return "intercept_tls_get_addr=0";
}
#endif
