#ifndef CHATVAULT_CCRYPTO_SHIM_H
#define CHATVAULT_CCRYPTO_SHIM_H
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#endif
