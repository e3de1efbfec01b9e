// A library with thread-local storage and nothing else, for
// dynamic_tls_exit_test: loaded with dlopen, its thread_local block is
// "dynamic TLS" (malloc'ed by glibc per thread on first use), as is that of
// libdnnl under the onednn plugin. 40 bytes: like libdnnl's 36, a request
// ASan serves from a chunk with a 16-byte header right before it.
extern "C" {

thread_local void* duet_test_tls_words[5];

// The calling thread's block: the address of its first word.
__attribute__((visibility("default"))) void** duet_test_tls_block() { return duet_test_tls_words; }

}  // extern "C"
