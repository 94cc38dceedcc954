/* The C side of libchatvault: memory that C code frees. Everything else is Swift (ChatVaultC). */
#define _DEFAULT_SOURCE 1
#include <stdlib.h>
#include <string.h>

#include "chatvault/chatvault.h"

void cv_free(void *memory) {
    free(memory);
}

void cv_error_free(cv_error *error) {
    if (error == NULL)
        return;
    free(error->domain);
    free(error->code);
    free(error->details);
    /* The message may name a path: cleared before it is released. */
    if (error->message != NULL) {
        explicit_bzero(error->message, strlen(error->message));
        free(error->message);
    }
    free(error);
}
