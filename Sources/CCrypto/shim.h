#ifndef CHATVAULT_CCRYPTO_SHIM_H
#define CHATVAULT_CCRYPTO_SHIM_H
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

/* OpenSSL's first initialisation registers an atexit handler that tears the library down while
   other threads (SQLCipher's page codec on a connection's queue) may still be using it; one
   crashed a test process at exit. Asking for no atexit handler must come before any other use. */
static inline int chatvault_openssl_init_without_atexit(void) {
    return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}
#endif
