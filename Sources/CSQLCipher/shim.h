#ifndef CHATVAULT_CSQLCIPHER_SHIM_H
#define CHATVAULT_CSQLCIPHER_SHIM_H
// SQLITE_HAS_CODEC exposes sqlite3_key and sqlite3_rekey in SQLCipher's header.
#define SQLITE_HAS_CODEC 1
#include <sqlcipher/sqlite3.h>

// SQLITE_TRANSIENT is a cast of -1 to a function pointer, which Swift cannot import.
static inline void (*chatvault_sqlite_transient(void))(void *) { return SQLITE_TRANSIENT; }
#endif
