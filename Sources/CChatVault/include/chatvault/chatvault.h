/* chatvault.h: ChatVault from C, C++, Vala and Python.
 *
 * An offline, encrypted-at-rest chat cache for Linux chat clients (SQLCipher, keyed from the
 * Secret Service). This header is the whole C API of libchatvault; it follows the conventions of the
 * GNOME C libraries (libsecret, GLib):
 *
 * - Opaque handles (cv_vault *, cv_simulator *): made by a _new function, released by their _free
 *   function. A NULL, already freed or foreign handle is refused with an error (domain
 *   CV_ERROR_DOMAIN_ARGUMENT), never dereferenced.
 * - Errors: a fallible call takes `cv_error **error` last. On failure it returns NULL / false and,
 *   when `error` is not NULL, sets `*error` to a new cv_error the caller frees with cv_error_free()
 *   (like GError: pass NULL to ignore it; `*error` must be NULL on entry). `code` is the seeds'
 *   error code (`ERROR_INTERNET_UNAVAILABLE`, `ERROR_OFFLINE_…`) or, for bad arguments,
 *   `ERR_INVALID_ARGUMENT`; `message` is English text with no message content and no key;
 *   `details` a stable word saying more where there is one (else NULL).
 * - Strings are UTF-8. A string passed in is copied (the caller keeps ownership); one returned as
 *   `char *` is the caller's, freed with cv_free(); one returned as `const char *` is static.
 *   Invalid UTF-8 is refused with an error.
 * - Models (messages, the encryption status, the settings) cross as JSON text; enums the app
 *   switches on are C enums.
 * - Callbacks run only inside cv_vault_dispatch() (or the GLib source of chatvault-glib.h, which
 *   calls it), on the thread the app calls it from, never on a library thread. cv_vault_get_fd()
 *   becomes readable when callbacks are due. After a listener is removed, or its vault freed, its
 *   callback never runs again; its destroy notifier runs once.
 * - Calls ending in _sync block the calling thread until done (as libsecret's _sync calls do);
 *   they never need the app's main loop to make progress. While one waits it dispatches the
 *   vault's due callbacks itself, on the calling thread (a login delivers its reset before it
 *   returns): call them from the thread that dispatches. A callback may call them too (nested
 *   dispatch). cv_vault_free() waits the same way for its logout; the app's callbacks are ended
 *   by then, so none of them runs.
 *
 * Thread safety: every function may be called from any thread; callbacks run where dispatched.
 */
#ifndef CHATVAULT_CHATVAULT_H
#define CHATVAULT_CHATVAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version (the SONAME is libchatvault.so.CV_ABI_VERSION). */
#define CV_ABI_VERSION 0

/* ------------------------------------------------------------------------------------------ */
/* Memory and errors                                                                            */

/* Frees a string or buffer this library returned (NULL is ignored). */
void cv_free(void *memory);

/* The library's own errors (code: one of the seeds' ERROR_… codes). */
#define CV_ERROR_DOMAIN_CHATVAULT "chatvault"
/* A NULL, freed or foreign handle, invalid UTF-8, malformed JSON, an out-of-range enum
 * (code "ERR_INVALID_ARGUMENT"). */
#define CV_ERROR_DOMAIN_ARGUMENT "chatvault-argument"

typedef struct cv_error {
    char *domain;  /* CV_ERROR_DOMAIN_… */
    char *code;    /* a stable code string */
    char *message; /* English, no content, no key */
    char *details; /* a stable word saying more, or NULL: for ERROR_INVALID_SEARCH_QUERY one of
                    * "empty", "onlyExclusions", "tooLong", "tooManyTerms" (the Swift
                    * exception's `details`); freed with the error */
} cv_error;

/* Frees an error and its strings (NULL is ignored). */
void cv_error_free(cv_error *error);

/* The library's version, "MAJOR.MINOR.PATCH" (static: do not free). */
const char *cv_version(void);

/* Called once when a callback's registration ends, with its user_data. */
typedef void (*cv_destroy_notify)(void *user_data);

/* ------------------------------------------------------------------------------------------ */
/* Enums                                                                                        */

typedef enum cv_receiver_type {
    CV_RECEIVER_USER = 0,
    CV_RECEIVER_GROUP = 1
} cv_receiver_type;

/* What opening the cache led to (OfflineState). */
typedef enum cv_open_state {
    CV_OPEN_LOGGED_OUT = 0,
    CV_OPEN_DISABLED = 1,          /* offline support off in the configuration */
    CV_OPEN_OPENING = 2,
    CV_OPEN_READY = 3,             /* the cache is open (encrypted if configured) */
    CV_OPEN_PLAINTEXT_FALLBACK = 4,/* encryption cannot run: an unencrypted cache, reported as such */
    CV_OPEN_UNAVAILABLE = 5,       /* temporarily (locked keyring, busy database): retried, never reset */
    CV_OPEN_ONLINE_ONLY = 6        /* encryption cannot run and the app chose online-only: no cache */
} cv_open_state;

/* Why the cache was reset (OfflineCacheResetReason). */
typedef enum cv_reset_reason {
    CV_RESET_KEY_LOST = 0,
    CV_RESET_WRONG_KEY = 1,
    CV_RESET_CORRUPTED = 2,
    CV_RESET_ESCALATED = 3,
    CV_RESET_ENCRYPTION_CHANGED = 4
} cv_reset_reason;

/* The catch-up sync (SyncState). */
typedef enum cv_sync_state {
    CV_SYNC_IDLE = 0,
    CV_SYNC_SYNCING = 1
} cv_sync_state;

/* pendingMessagesLost when the count is not known. */
#define CV_PENDING_COUNT_UNKNOWN (-1)

/* ------------------------------------------------------------------------------------------ */
/* The simulator: an in-process chat server, so a C app can test itself                         */

typedef struct cv_simulator cv_simulator;

/* A new simulated server; the same seed gives the same ids. Free with cv_simulator_free(). */
cv_simulator *cv_simulator_new(uint64_t seed);
void cv_simulator_free(cv_simulator *simulator);
/* Adds a user (uid and display name). */
bool cv_simulator_add_user(cv_simulator *simulator, const char *uid, const char *name, cv_error **error);
/* Posts a text from one user to a user or group, as the server's truth; its id in *id_out (may be NULL). */
bool cv_simulator_post_text(cv_simulator *simulator, const char *from_uid, cv_receiver_type receiver_type,
                            const char *receiver, const char *text, int64_t *id_out, cv_error **error);
/* Takes a user's device off the network (online = false) or back. */
bool cv_simulator_set_online(cv_simulator *simulator, const char *uid, bool online, cv_error **error);
/* Adds a group (guid, display name) owned by `owner` (a uid, its admin; may be NULL). */
bool cv_simulator_add_group(cv_simulator *simulator, const char *guid, const char *name, const char *owner, cv_error **error);
/* Adds a user to a group as a participant. */
bool cv_simulator_add_member(cv_simulator *simulator, const char *guid, const char *uid, cv_error **error);
/* Posts a text as a reply in the thread of message `parent_id`; its id in *id_out (may be NULL). */
bool cv_simulator_post_reply(cv_simulator *simulator, const char *from_uid, cv_receiver_type receiver_type, const char *receiver,
                             int64_t parent_id, const char *text, int64_t *id_out, cv_error **error);

/* ------------------------------------------------------------------------------------------ */
/* The vault                                                                                    */

typedef struct cv_vault cv_vault;

/* A vault over the simulator's device for `uid`. `settings_json` is an object with the
 * OfflineConfig fields ("enabled", "encryption", "encryptionFailureBehavior": "onlineOnly" |
 * "plaintextFallback", "cacheDurationDays", "maxStorageSize", "maxMessagesPerConversation",
 * "maxConversations", "maxPendingMessages", "autoSendPendingOnReconnect",
 * "pendingQueueOverflowPolicy": "dropOldest" | "rejectNewest", "maxMediaCacheSize", "mediaCaching":
 * "auto" | "off", "maxSnapshotQueries", "snapshotTtlDays") and the settings
 * ("applicationId" (required, reverse-DNS), "applicationName", "rootDirectory", "keyStore":
 * "secretService" | "software" | "memory", or an array of them in order of preference (their
 * names for cv_vault_move_key_sync: "secret-service", "file", "memory"; a memory store lives as
 * long as its vault), "keyDirectory" (software), "secretServiceUnlockPrompt"
 * (ask the desktop to unlock a locked keyring), "secretServiceTimeoutMs", "retry" and "reconnect"
 * (each {"initialDelayMs", "maximumDelayMs", "multiplier" (1…100)}: the backoff while the cache is
 * unavailable, and while the server cannot be reached), "escalationThreshold" (1…1000),
 * "quarantine": {"maxEntries", "maxAgeDays"}, "synchronousIntegrityCheckLimit" (bytes),
 * "evictionDelayMs", "stableConnectionDelayMs", "sync": {"pageSize" (1…5000), "maxPagesPerSweep",
 * "maxFollowUpSweeps", "maxChangesPerPage", "forceCooldownMs", "flushWaitMs",
 * "conversationPageSize" (1…50)}, "media": {"maxFileBytes", "idleTimeoutMs",
 * "backgroundConcurrency" (1…8), "runtimeDirectory"}). Unknown keys (at any depth), wrong types
 * and out-of-range values are refused (CV_ERROR_DOMAIN_ARGUMENT); the OfflineConfig fields are
 * normalised as the Swift builder does. Callbacks always go through cv_vault_dispatch(): the C
 * API has no other callback executor. The simulator must outlive the vault. Free with
 * cv_vault_free(). */
cv_vault *cv_vault_new_simulated(const char *settings_json, cv_simulator *simulator, const char *uid, cv_error **error);

/* A vault over a Matrix homeserver for `user_id` (@user:server), with the same settings JSON.
 * Signs in with the session this application keeps in the Secret Service (checked with the
 * server, renewed with its refresh token when it expired); when there is none, or its token was
 * revoked, with the password read to the end of `password_fd` (the caller's descriptor, left open;
 * -1 when a kept session is expected), and keeps the new session there, with a refresh token: the
 * tokens renewed while the vault runs are kept there too. The password is read into memory that is wiped after use and is never
 * passed as a string; the access token never crosses to C. Errors: ERR_MATRIX_PASSWORD_NEEDED,
 * ERR_MATRIX_SESSION_STORE (the keyring locked or missing), the server's errcode (M_FORBIDDEN…),
 * ERROR_INTERNET_UNAVAILABLE. Then cv_vault_login_sync() with the same user id. */
cv_vault *cv_vault_new_matrix_sync(const char *settings_json, const char *homeserver, const char *user_id, int password_fd,
                                   cv_error **error);

/* Logs out (keeping the cache), removes every listener (their destroy notifiers run) and frees
 * the vault. Callbacks not yet dispatched are dropped. NULL is ignored. */
void cv_vault_free(cv_vault *vault);

/* Opens (or creates) the user's cache. Returns the state; *detail_out (may be NULL) receives the
 * reason of an unavailable / fallback state as a code string (cv_free), or NULL. A refused argument
 * answers CV_OPEN_LOGGED_OUT with *error set. */
cv_open_state cv_vault_login_sync(cv_vault *vault, const char *uid, char **detail_out, cv_error **error);
/* Closes the cache and keeps it. */
bool cv_vault_logout_sync(cv_vault *vault, cv_error **error);
/* Tries a temporarily unavailable cache again now. */
cv_open_state cv_vault_retry_open_sync(cv_vault *vault, char **detail_out, cv_error **error);
/* True only while a cache is open and serving: read it at each decision. */
bool cv_vault_is_offline_enabled(cv_vault *vault);
/* The seeds' encryption status as a JSON object ("enabled", "atRest", "keyStorage",
 * "cipherAvailable", "cipher", "leakage"); cv_free. NULL (with *error) for a bad handle. */
char *cv_vault_get_encryption_status(cv_vault *vault, cv_error **error);
/* The cache's audit journal, oldest first, as a JSON array (cv_free): each entry {"at" (ISO 8601),
 * "kind": "opened" | "reset" | "delivered" | "refused" | "restored" | "cleared" | "keyChanged", and as
 * the kind has them "outcome", "reason", "pendingMessagesLost", "listeners" (the ids called: a C
 * listener's is "c-<its id>"), "released", "executor", "onMainThread", "millisecondsAfterOpen",
 * "readsServedBefore", "cacheId", "detail"}. No message content, user id or key material. NULL
 * (with *error) for a bad handle; [] before login. */
char *cv_vault_get_audit_journal(cv_vault *vault, cv_error **error);
/* Bytes on disk of the user's cache (database, WAL, media); -1 (with *error) for a bad handle. */
int64_t cv_vault_get_cache_size(cv_vault *vault, cv_error **error);
/* Deletes the cached data and keeps the cache usable (unsent messages fail as discarded). */
bool cv_vault_clear_offline_cache_sync(cv_vault *vault, cv_error **error);

/* A two-phase read of a conversation's newest `limit` messages (1…100): answers a JSON object {"cached": [message…] | null,
 * "server": [message…] | null, "serverError": {"code", "message"} | null} (cv_free). A message is
 * {"id", "localMessageId", "conversationId", "sender", "receiver", "receiverType", "category",
 * "type", "text"?, "sentAt", "editedAt", "deletedAt", "deliveredAt", "readAt", "status", "source",
 * "failureReason"?, "parentMessageId", "replyCount", "quotedMessageId", "reactions": [{"reaction",
 * "count", "reactedByMe"}]}; a media message adds "attachment": {"url", "fileName", "extension",
 * "mimeType", "size", "localPath"?} and "caption"?; a custom message "customType"?, "subType"?,
 * "customData"?, "conversationText"?. Keys are written in sorted order; new keys may be added.
 * Offline the server phase is ERROR_INTERNET_UNAVAILABLE. */
char *cv_vault_fetch_messages_sync(cv_vault *vault, cv_receiver_type receiver_type, const char *receiver,
                                   int limit, cv_error **error);

/* The outcome of a send, delivered through cv_vault_dispatch(): `stage` is "pending" (committed
 * to the outbox: it survives a crash from here), "sent" (the server has it) or "error";
 * `message_json` the message (borrowed: valid during the call); `error` set for "error"
 * (borrowed). */
typedef void (*cv_send_callback)(const char *stage, const char *message_json, const cv_error *error, void *user_data);

/* Sends a text through the durable outbox: `callback` hears "pending" then "sent", or "error"
 * (possibly after "pending": queued, sent on reconnect). `destroy` runs once after the last stage.
 * Returns false (with *error, no callback) only for a refused argument. */
bool cv_vault_send_text(cv_vault *vault, cv_receiver_type receiver_type, const char *receiver, const char *text,
                        cv_send_callback callback, void *user_data, cv_destroy_notify destroy, cv_error **error);
/* The unsent messages as a JSON array (cv_free). */
char *cv_vault_get_pending_messages_sync(cv_vault *vault, cv_error **error);

/* A two-phase read of the conversation list's first `limit` conversations (1…50), newest first:
 * the same JSON object as cv_vault_fetch_messages_sync, each item {"conversationId",
 * "conversationType": "user" | "group", "with" (the uid or guid), "unreadMessageCount",
 * "updatedAt", "lastMessage": message | null}. */
char *cv_vault_fetch_conversations_sync(cv_vault *vault, int limit, cv_error **error);

/* ------------------------------------------------------------------------------------------ */
/* Paged reads and lookups                                                                      */

/* What a cv_request lists. */
typedef enum cv_request_kind {
    CV_REQUEST_MESSAGES = 0,      /* MessagesRequest: pages both ways */
    CV_REQUEST_CONVERSATIONS = 1, /* ConversationRequest */
    CV_REQUEST_THREADS = 2,       /* ThreadsRequest */
    CV_REQUEST_USERS = 3,         /* UsersRequest */
    CV_REQUEST_GROUPS = 4,        /* GroupsRequest */
    CV_REQUEST_GROUP_MEMBERS = 5  /* GroupMembersRequest */
} cv_request_kind;

/* A paged, two-phase read that remembers where it is (the seeds' request objects): each fetch
 * continues from the last one. Free with cv_request_free(); it holds no reference that keeps
 * its vault alive: once the vault is freed, a fetch is refused (CV_ERROR_DOMAIN_ARGUMENT). */
typedef struct cv_request cv_request;

/* A request of `kind` over `vault`, from a JSON object of the builder's settings (unknown keys,
 * wrong types and out-of-range values are refused with CV_ERROR_DOMAIN_ARGUMENT):
 * - messages: "uid" | "guid", "limit" (1…100), "timestamp", "messageId", "parentMessageId",
 *   "unread", "hideReplies", "hideDeleted", "hideMessagesFromBlockedUsers", "categories" [..],
 *   "types" [..], "searchKeyword", "updatedAfter", "updatesOnly", "withParent", "tags" [..],
 *   "withTags";
 * - conversations: "limit" (1…50), "conversationType": "user" | "group", "tags", "withTags",
 *   "userTags", "groupTags", "withUserAndGroupTags", "includeBlockedUsers", "withBlockedInfo",
 *   "searchKeyword", "unread";
 * - threads: "uid" | "guid", "limit" (1…100), "participatedByMe";
 * - users: "limit" (1…100), "searchKeyword", "searchIn" [..], "status": "online" | "offline" |
 *   "available", "hideBlockedUsers", "roles" [..], "friendsOnly", "tags", "withTags", "uids" [..],
 *   "sortBy", "sortOrder": "asc" | "desc";
 * - groups: "limit" (1…100), "searchKeyword", "joinedOnly", "tags", "withTags";
 * - group members: "guid" (required), "limit" (1…100), "searchKeyword", "scopes" [..], "status".
 * "{}" takes every default. */
cv_request *cv_request_new(cv_vault *vault, cv_request_kind kind, const char *query_json, cv_error **error);
void cv_request_free(cv_request *request);

/* The next page, both phases, as the JSON object of cv_vault_fetch_messages_sync ({"cached",
 * "server", "serverError"}; "cached" is null when offline support is off, "server" null when the
 * server phase failed, with its error in "serverError"). Items: messages and conversations as
 * documented above; threads {"parentMessageId", "parentMessage": message, "replyCount",
 * "lastReply": message | null, "conversationId", "receiverType", "receiver", "isSubscribed",
 * "unreadReplyCount", "updatedAt"}; users {"uid", "name", "avatar", "role", "statusMessage",
 * "status", "lastActiveAt", "blockedByMe", "hasBlockedMe", "tags", "metadata"?}, members the same
 * with "scope", "joinedAt", "guid"; groups {"guid", "name", "icon", "description", "owner",
 * "type", "scope", "hasJoined", "membersCount", "createdAt", "updatedAt", "joinedAt", "tags",
 * "metadata"?}. cv_free the result; NULL with *error for a bad handle. A second fetch while one
 * is in flight answers ERROR_REQUEST_IN_PROGRESS in "serverError". */
char *cv_request_fetch_next_sync(cv_request *request, cv_error **error);
/* The previous (older) page of a message request; other kinds are refused. */
char *cv_request_fetch_previous_sync(cv_request *request, cv_error **error);

/* One message by its server id, both phases: {"cached": message | null, "server": message | null,
 * "serverError": {"code", "message"} | null} (cv_free). */
char *cv_vault_get_message_sync(cv_vault *vault, int64_t message_id, cv_error **error);
/* The conversation with a user (CV_RECEIVER_USER, a uid) or a group (a guid), both phases, as
 * cv_vault_get_message_sync answers (items as cv_vault_fetch_conversations_sync's). */
char *cv_vault_get_conversation_sync(cv_vault *vault, cv_receiver_type type, const char *with, cv_error **error);

/* Retries an unsent message now (by its localMessageId). */
bool cv_vault_retry_message_sync(cv_vault *vault, const char *local_id, cv_error **error);
/* Removes an unsent (pending or failed) message from the outbox, with its copied media. As the
 * seeds say, its send gets no final outcome and no outbox event fires: a cv_vault_send_*() callback
 * still registered for it hears no further stage, and its destroy notifier runs before this
 * returns. ERROR_OFFLINE_MESSAGE_IN_FLIGHT while its request is outstanding (try again),
 * ERROR_OFFLINE_MESSAGE_NOT_FOUND for an unknown local id. */
bool cv_vault_discard_message_sync(cv_vault *vault, const char *local_id, cv_error **error);

/* Runs a catch-up sweep now and waits for it (refused during the cooldown after the last one:
 * ERROR_OFFLINE_SYNC_COOLDOWN). */
bool cv_vault_force_sync_now_sync(cv_vault *vault, cv_error **error);
/* Whether a sweep is running (CV_SYNC_IDLE for a bad handle). */
cv_sync_state cv_vault_get_sync_state(cv_vault *vault);
/* The server time (epoch seconds) the cache is caught up to; 0 before the first sweep, -1 for a
 * bad handle. */
int64_t cv_vault_get_last_sync_timestamp(cv_vault *vault);

/* Messages as they arrive: `event` is "received" (realtime), "edited", "deleted", or "synced"
 * (each message the catch-up brought, after its page is in the cache); `message_json` is
 * borrowed (valid during the call). */
typedef void (*cv_message_callback)(const char *event, const char *message_json, void *user_data);
/* Registers a message listener; its id (> 0), or 0 with *error. Removed with cv_vault_remove_listener(). */
unsigned cv_vault_add_message_listener(cv_vault *vault, cv_message_callback callback, void *user_data,
                                       cv_destroy_notify destroy, cv_error **error);

/* What happened to an unsent message (OutboxListener). */
typedef enum cv_outbox_event {
    CV_OUTBOX_PENDING = 0, /* committed to the outbox */
    CV_OUTBOX_SENT = 1,    /* the server has it */
    CV_OUTBOX_FAILED = 2   /* it left the outbox unsent: see the cv_failure_reason */
} cv_outbox_event;

/* Why a message failed (MessageFailureReason; also the message JSON's "failureReason"). */
typedef enum cv_failure_reason {
    CV_FAILURE_NONE = 0,           /* not failed (pending, sent) */
    CV_FAILURE_TRANSIENT = 1,      /* a retry is likely to help */
    CV_FAILURE_PERMANENT = 2,      /* a retry will not help */
    CV_FAILURE_QUEUE_OVERFLOW = 3, /* evicted from a full outbox for a newer send (ERROR_QUEUE_OVERFLOW) */
    CV_FAILURE_QUEUE_FULL = 4,     /* refused: the outbox is full (ERROR_QUEUE_FULL) */
    CV_FAILURE_BYTE_OVERFLOW = 5,  /* outgoing media over the byte budget */
    CV_FAILURE_DISCARDED = 6       /* removed before it could send */
} cv_failure_reason;

/* The outbox as it changes: `reason` is CV_FAILURE_NONE except for CV_OUTBOX_FAILED;
 * `message_json` is borrowed (valid during the call). */
typedef void (*cv_outbox_callback)(cv_outbox_event event, const char *message_json, cv_failure_reason reason, void *user_data);
/* Registers an outbox listener; its id (> 0), or 0 with *error. */
unsigned cv_vault_add_outbox_listener(cv_vault *vault, cv_outbox_callback callback, void *user_data,
                                      cv_destroy_notify destroy, cv_error **error);

/* Told after a new cache replaced one that could not be used, before it serves reads; repeated at
 * later opens until delivered. pending_messages_lost is exact, or CV_PENDING_COUNT_UNKNOWN. */
typedef void (*cv_reset_callback)(cv_reset_reason reason, int pending_messages_lost, void *user_data);

/* Registers a reset listener (held until removed or the vault is freed, unlike the Swift API's
 * weak references). Returns its id (> 0), or 0 with *error. */
unsigned cv_vault_add_reset_listener(cv_vault *vault, cv_reset_callback callback, void *user_data,
                                     cv_destroy_notify destroy, cv_error **error);
/* Removes a listener of any kind: its callback never runs again, its destroy notifier runs now. */
bool cv_vault_remove_listener(cv_vault *vault, unsigned listener_id, cv_error **error);

/* ------------------------------------------------------------------------------------------ */
/* Media, custom sends and the sync listener                                                    */

/* What a media message carries (MessageType: image, video, audio, file). */
typedef enum cv_media_type {
    CV_MEDIA_IMAGE = 0,
    CV_MEDIA_VIDEO = 1,
    CV_MEDIA_AUDIO = 2,
    CV_MEDIA_FILE = 3
} cv_media_type;

/* Sends a media message through the durable outbox, as cv_vault_send_text() does (the same
 * stages, the same callback, `destroy` once after the last stage). `file_path` names a local file
 * (UTF-8; absolute, or relative to the current directory): it is copied into the cache (encrypted
 * when the cache is) before "pending", so the message survives a restart; the original is not
 * touched or kept. A file that cannot be copied gives only "error" (ERROR_OFFLINE_MEDIA_COPY_FAILED).
 * `caption` may be NULL. Once sent, the message JSON has "attachment" (see
 * cv_vault_fetch_messages_sync) and "caption". Returns false (with *error, no callback) only for a refused argument. */
bool cv_vault_send_media(cv_vault *vault, cv_receiver_type receiver_type, const char *receiver, const char *file_path,
                         cv_media_type media_type, const char *caption, cv_send_callback callback, void *user_data,
                         cv_destroy_notify destroy, cv_error **error);

/* Sends a custom message (the app's own `custom_type`, e.g. "location", and its data as the text of
 * a JSON object) through the durable outbox, with the stages of cv_vault_send_text(). The message
 * JSON carries "customData" as given. Malformed JSON or a JSON value that is not an object is
 * refused (false, *error, no callback). */
bool cv_vault_send_custom(cv_vault *vault, cv_receiver_type receiver_type, const char *receiver, const char *custom_type,
                          const char *custom_data_json, cv_send_callback callback, void *user_data,
                          cv_destroy_notify destroy, cv_error **error);

/* The receive-side media mode (MediaCachingMode). */
typedef enum cv_media_caching_mode {
    CV_MEDIA_CACHING_AUTO = 0, /* received attachments download in the background */
    CV_MEDIA_CACHING_OFF = 1   /* only cv_vault_download_media() fetches bytes */
} cv_media_caching_mode;

/* The mode in effect: the settings' "mediaCaching" while the cache is open and serving,
 * CV_MEDIA_CACHING_OFF otherwise (before login, after logout, offline support disabled); so a UI
 * can rely on it alone. CV_MEDIA_CACHING_OFF (with *error) for a bad handle. */
cv_media_caching_mode cv_vault_get_media_caching_mode(cv_vault *vault, cv_error **error);

/* A path to the cached bytes of `url` (an attachment's "url"; matched without its query or
 * fragment), or NULL when they are not cached (and *error untouched) or for a refused argument
 * (with *error). Answers offline too. With encryption on, the path is a decrypted view under
 * $XDG_RUNTIME_DIR (made now if needed; NULL when there is no safe runtime directory), removed at
 * logout: open it, do not keep the path. The file becomes the most recently used. cv_free. */
char *cv_vault_get_cached_media_path(cv_vault *vault, const char *url, cv_error **error);

/* A download's progress: `percent` 0…100, never backwards, only when the server announces the
 * length. */
typedef void (*cv_media_progress_callback)(int percent, void *user_data);
/* A download's end: `local_path` (borrowed; as cv_vault_get_cached_media_path answers it) or
 * `error` (borrowed), the other NULL. */
typedef void (*cv_media_download_callback)(const char *local_path, const cv_error *error, void *user_data);

/* Fetches and caches an attachment's bytes: the cache first, then `url`, then (when the server
 * refuses the URL as expired) one re-signed URL asked for with `message_id` (the message's "id";
 * 0 when there is none). Requests for the same URL share one download; works in both caching
 * modes. `progress` (may be NULL) and then `done` (once) run through cv_vault_dispatch();
 * `destroy` runs once after `done`, or at cv_vault_free() if the download has not ended. Errors
 * in `done` (domain CV_ERROR_DOMAIN_CHATVAULT): ERROR_OFFLINE_MEDIA_NOT_CACHED (not cached, no
 * connection), ERROR_OFFLINE_MEDIA_UNRESOLVABLE (the download failed, or the URL is not http(s)),
 * ERROR_OFFLINE_DISABLED, ERROR_OFFLINE_MEDIA_VIEW_UNAVAILABLE (encrypted bytes, no safe
 * $XDG_RUNTIME_DIR); never an HTTP status. Returns false (with *error, no callback) only for a
 * refused argument (a negative message_id among them). */
bool cv_vault_download_media(cv_vault *vault, const char *url, int64_t message_id, cv_media_progress_callback progress,
                             cv_media_download_callback done, void *user_data, cv_destroy_notify destroy, cv_error **error);

/* What a media listener hears: the background downloads of CV_MEDIA_CACHING_AUTO (not
 * cv_vault_download_media(), which reports to its own callbacks). */
typedef enum cv_media_event {
    CV_MEDIA_DOWNLOADED = 0,     /* message_id, url (without its query) and local_path are set */
    CV_MEDIA_DOWNLOAD_FAILED = 1 /* error is set (code ERROR_MEDIA_DOWNLOAD_FAILED); url when known */
} cv_media_event;
/* `message_id` is the message's server id as a decimal string (its local id when it has none);
 * every string and `error` borrowed, NULL when not set. */
typedef void (*cv_media_callback)(cv_media_event event, const char *message_id, const char *url, const char *local_path,
                                  const cv_error *error, void *user_data);
/* Registers a media listener; its id (> 0), or 0 with *error. Removed with cv_vault_remove_listener(). */
unsigned cv_vault_add_media_listener(cv_vault *vault, cv_media_callback callback, void *user_data,
                                     cv_destroy_notify destroy, cv_error **error);

/* The phases of a catch-up sweep (SyncListener), in order: conversations, then messages. */
typedef enum cv_sync_event {
    CV_SYNC_EVENT_CONVERSATIONS_STARTED = 0,   /* payload {} */
    CV_SYNC_EVENT_CONVERSATIONS_COMPLETED = 1, /* payload {"conversations": [conversation…]}, the fresh page as cached */
    CV_SYNC_EVENT_CONVERSATIONS_FAILED = 2,    /* payload {}, error set */
    CV_SYNC_EVENT_MESSAGES_STARTED = 3,        /* payload {} */
    CV_SYNC_EVENT_MESSAGES_COMPLETED = 4,      /* payload {"messages": [message…], "outcome": "caughtUp" | "partial"} */
    CV_SYNC_EVENT_MESSAGES_FAILED = 5          /* payload {}, error set */
} cv_sync_event;
/* `payload_json` is a JSON object (borrowed, never NULL): the messages the sweep wrote (new ones and
 * cached ones it changed) in log order, and whether the gap was replayed exactly ("caughtUp") or
 * more remains ("partial": a follow-up sweep goes on); conversations and messages as in
 * cv_vault_fetch_conversations_sync() and cv_vault_fetch_messages_sync(). `error` borrowed, NULL
 * unless failed. */
typedef void (*cv_sync_callback)(cv_sync_event event, const char *payload_json, const cv_error *error, void *user_data);
/* Registers a sync listener (sweeps after a reconnect and cv_vault_force_sync_now_sync()); its id
 * (> 0), or 0 with *error. Removed with cv_vault_remove_listener(). */
unsigned cv_vault_add_sync_listener(cv_vault *vault, cv_sync_callback callback, void *user_data,
                                    cv_destroy_notify destroy, cv_error **error);

/* The simulator: a media message from one user, as the server's truth. The bytes of the local
 * file at `file_path` (read now, at most 64 MiB) are served at a new https URL (the attachment's
 * "url"; also in *url_out when not NULL, cv_free), named after the file, with `mime_type` (NULL:
 * "application/octet-stream") and `caption` (may be NULL); its id in *id_out (may be NULL). */
bool cv_simulator_post_media(cv_simulator *simulator, const char *from_uid, cv_receiver_type receiver_type,
                             const char *receiver, cv_media_type media_type, const char *file_path, const char *mime_type,
                             const char *caption, int64_t *id_out, char **url_out, cv_error **error);

/* ------------------------------------------------------------------------------------------ */
/* Key management                                                                               */
/*
 * The logged-in user's cache key: rotated, moved between stores, given a recovery secret, and
 * caches restored from the quarantine, recovered with that secret, exported and imported. Each
 * call closes the cache, makes the change with the cache's lock held (a crash at any instant is
 * finished or rolled back by the next open) and opens it again; it needs a logged-in user whose
 * cache is open and encrypted (CV_OPEN_READY), blocks the calling thread meanwhile and dispatches
 * the vault's due callbacks there (as every _sync call). Call from the dispatching thread.
 *
 * Secrets: a recovery or export secret never crosses as a string. One this library makes is
 * written to `secret_fd` (the caller's descriptor, open for writing, left open; synced when it is
 * a regular file; a closed pipe is an error, never SIGPIPE) as one line, nine groups of four
 * ("ABCD-EFGH-…-2345\n"), and this library's copies are wiped. One the caller gives back is read to
 * the end of `secret_fd` (open for reading, left open; case, spaces and dashes ignored) into a
 * buffer wiped after use. Give the user the secret once, to write down; nothing shows it again.
 *
 * Reports are JSON objects (cv_free) of ids, store names, counts and times: never a key or a
 * secret. Errors: CV_ERROR_DOMAIN_ARGUMENT for a bad handle, string or descriptor (checked before
 * anything changes); otherwise CV_ERROR_DOMAIN_CHATVAULT with one of the codes below. Every one
 * but CV_KEY_ERROR_UNFINISHED and CV_KEY_ERROR_SECRET_NOT_WRITTEN means nothing changed.
 */

/* Nobody is logged in (no cache to change). */
#define CV_KEY_ERROR_NO_CACHE "ERR_KEY_NO_CACHE"
/* The cache is not encrypted, or not open and serving: there is no key to change. */
#define CV_KEY_ERROR_NOT_ENCRYPTED "ERR_KEY_NOT_ENCRYPTED"
/* The cache cannot be opened now (locked keyring, busy, full disk…): try again later. */
#define CV_KEY_ERROR_UNAVAILABLE "ERR_KEY_UNAVAILABLE"
/* No key store of that name is configured (cv_vault_move_key_sync). */
#define CV_KEY_ERROR_UNKNOWN_STORE "ERR_KEY_UNKNOWN_STORE"
/* The key already is in that store. */
#define CV_KEY_ERROR_ALREADY_IN_STORE "ERR_KEY_ALREADY_IN_STORE"
/* The rewritten cache or the copied key did not verify; the change was abandoned. */
#define CV_KEY_ERROR_VERIFICATION_FAILED "ERR_KEY_VERIFICATION_FAILED"
/* The change passed its point of no return and stopped: the cache's next open finishes it. */
#define CV_KEY_ERROR_UNFINISHED "ERR_KEY_UNFINISHED"
/* No quarantined cache has that id. */
#define CV_KEY_ERROR_NO_SUCH_ENTRY "ERR_KEY_NO_SUCH_ENTRY"
/* The quarantined cache's key is not in its store (its recovery secret can bring it back). */
#define CV_KEY_ERROR_KEY_NOT_PRESENT "ERR_KEY_KEY_NOT_PRESENT"
/* No quarantined cache has a recovery file. */
#define CV_KEY_ERROR_NO_RECOVERABLE_CACHE "ERR_KEY_NO_RECOVERABLE_CACHE"
/* The secret is well formed but opens nothing it was tried on (attempts are not limited; each
 * costs the key derivation, about half a second). */
#define CV_KEY_ERROR_WRONG_SECRET "ERR_KEY_WRONG_SECRET"
/* The export file cannot be used (not an export, damaged) or created (it must not exist yet). */
#define CV_KEY_ERROR_FILE_UNUSABLE "ERR_KEY_FILE_UNUSABLE"
/* A test seam of the Swift library; not reached through this API. */
#define CV_KEY_ERROR_SIMULATED_CRASH "ERR_KEY_SIMULATED_CRASH"
/* What secret_fd gave is not a secret (36 letters A-Z and digits 2-7), or nothing. */
#define CV_KEY_ERROR_SECRET_MALFORMED "ERR_KEY_SECRET_MALFORMED"
/* The secret read has a typo (its checksum does not match). */
#define CV_KEY_ERROR_SECRET_TYPO "ERR_KEY_SECRET_TYPO"
/* The change was made but its secret could not be written to secret_fd (EPIPE, ENOSPC…): that
 * secret is lost; make a new one (a recovery secret replaced any earlier one; an export is useless). */
#define CV_KEY_ERROR_SECRET_NOT_WRITTEN "ERR_KEY_SECRET_NOT_WRITTEN"

/* Replaces the cache's key with a new random one and rewrites the cache under it; every cached
 * message and unsent message stays. Answers {"cacheId", "oldKeyId", "newKeyId", "fromStore",
 * "toStore", "seconds", "databaseBytes", "peakBytes", "notes": [string]} (key ids, never keys). */
char *cv_vault_rotate_key_sync(cv_vault *vault, cv_error **error);
/* Moves the key to another configured store by its name ("secret-service", "file", a custom
 * store's name); the same report. CV_KEY_ERROR_UNKNOWN_STORE when the vault's settings configure
 * no store of that name, CV_KEY_ERROR_ALREADY_IN_STORE when it is there already. */
char *cv_vault_move_key_sync(cv_vault *vault, const char *store_name, cv_error **error);

/* Makes a recovery secret for the cache (about half a second) and writes it to `secret_fd` (see
 * above); a new secret replaces any earlier one. Answers {"cacheId", "keyId", "kdfSeconds"}: not
 * the secret. When the key is later lost or wrong, the reset happens as usual (the reset listener
 * hears it) and cv_vault_recover_sync() brings the old cache back. */
char *cv_vault_create_recovery_secret_sync(cv_vault *vault, int secret_fd, cv_error **error);
/* Restores the newest quarantined cache the recovery secret read from `secret_fd` opens, messages
 * and outbox, as the current cache (the unsent messages of the cache it replaces are merged in; the
 * rest of that cache is set aside in the quarantine) and stores its key again. Answers
 * {"restoredEntry", "cacheId", "messages", "pending", "mergedPending", "replacedAs": "quarantine/ID" | null (where the
 * replaced cache went; ID is its entry id)}.
 * CV_KEY_ERROR_WRONG_SECRET, _SECRET_TYPO, _SECRET_MALFORMED, _NO_RECOVERABLE_CACHE: nothing changed. */
char *cv_vault_recover_sync(cv_vault *vault, int secret_fd, cv_error **error);

/* The logged-in user's quarantined caches, newest first, as a JSON array (cv_free; [] when nobody
 * is logged in) of {"id", "reason": "keyLost" | "wrongKey" | "corrupted" | "escalated" |
 * "encryptionChanged" | "replaced" | "imported", "at" (epoch seconds), "bytes", "cacheId" | null,
 * "encrypted", "keyPresent": bool | null (unknown), "restorable" (its key is in its store now),
 * "recoverableWithSecret", "pendingMessagesLost" (-1: unknown), "reported"}. Asks the key store
 * about each entry. */
char *cv_vault_list_quarantined_caches_sync(cv_vault *vault, cv_error **error);
/* Restores a quarantined cache whose key is in its store again (a "restorable" entry) as the
 * current cache, as cv_vault_recover_sync() does; the same report. CV_KEY_ERROR_KEY_NOT_PRESENT
 * for an entry whose key is gone (recover it with its secret), _NO_SUCH_ENTRY. */
char *cv_vault_restore_quarantined_cache_sync(cv_vault *vault, const char *entry_id, cv_error **error);

/* Writes the cache (messages, outbox, media, its key wrapped by a new one-time secret) to one new
 * file at `path` (created 0600; it must not exist) for another machine, and that secret to
 * `secret_fd`: the file is useless without it. Answers {"cacheId", "bytes", "files"}. */
char *cv_vault_export_cache_sync(cv_vault *vault, const char *path, int secret_fd, cv_error **error);
/* Makes the export at `path` the logged-in user's cache, opened with the secret read from
 * `secret_fd`, its key stored in this vault's key store; what the current cache holds unsent is
 * merged in, the rest set aside. The restore report. CV_KEY_ERROR_WRONG_SECRET (nothing changed),
 * _FILE_UNUSABLE. */
char *cv_vault_import_cache_sync(cv_vault *vault, const char *path, int secret_fd, cv_error **error);

/* ------------------------------------------------------------------------------------------ */
/* Local search                                                                                 */
/*
 * Searches the logged-in user's cached messages, offline too (the encrypted cache's own index;
 * a cv_request's "searchKeyword" is still the server's alone). The query: words (all must
 * match), "phrases", prefix*, -word to exclude; case and accents do not matter, CJK text is
 * found by any run of its characters. Whatever is typed is taken as words, never as operators.
 *
 * Errors of a search (domain CV_ERROR_DOMAIN_CHATVAULT): ERROR_INVALID_SEARCH_QUERY (nothing to
 * look for, only exclusions, longer than 1024 characters or more than 32 terms; the message says
 * which), ERROR_OFFLINE_DISABLED (no cache is open), ERROR_OFFLINE_MESSAGE_PERSIST_FAILED (the
 * cache could not be read just now: nothing changed, try again). A NULL, freed or foreign handle,
 * invalid UTF-8 or an out-of-range value is refused (CV_ERROR_DOMAIN_ARGUMENT) before anything runs.
 *
 *     cv_search_options *options = cv_search_options_new ();
 *     cv_search_options_set_conversation (options, CV_RECEIVER_USER, "bob", NULL);
 *     cv_search_page *page = cv_vault_search_cached_messages_sync (vault, "train -bus", options, &error);
 *     for (size_t i = 0; i < cv_search_page_get_hit_count (page); i++) {
 *         char *snippet = cv_search_page_get_snippet (page, i, NULL);
 *         cv_search_match *marks; size_t n;
 *         cv_search_page_get_matches (page, i, CV_SEARCH_FIELD_SNIPPET, &marks, &n, NULL);
 *         ... snippet + marks[k].start, marks[k].length bytes: a word to highlight ...
 *         cv_free (marks); cv_free (snippet);
 *     }
 *     cv_search_cursor *next = cv_search_page_get_next_cursor (page, NULL);   (NULL: the last page)
 *     cv_search_options_set_cursor (options, next, NULL);                      (then search again)
 *     cv_search_cursor_free (next); cv_search_page_free (page); cv_search_options_free (options);
 */

/* The order of the results (CachedSearchOrder). */
typedef enum cv_search_order {
    CV_SEARCH_ORDER_NEWEST_FIRST = 0, /* by the time sent (the default) */
    CV_SEARCH_ORDER_OLDEST_FIRST = 1,
    CV_SEARCH_ORDER_RELEVANCE = 2     /* best match first (more of the words, rarer ones, a shorter text); ties newest first */
} cv_search_order;

/* What of a hit a cv_search_match points into. */
typedef enum cv_search_field {
    CV_SEARCH_FIELD_TEXT = 0,   /* the searched text (cv_search_page_get_text) */
    CV_SEARCH_FIELD_SNIPPET = 1 /* the excerpt (cv_search_page_get_snippet) */
} cv_search_field;

/* A word of the query found in a hit: `length` bytes from byte `start` of the UTF-8 string the
 * field names (whole characters; as PangoAttribute's indices count). */
typedef struct cv_search_match {
    size_t start;
    size_t length;
} cv_search_match;

/* Where the next page of a search starts: copied from a page, given to the options of the same
 * query. Opaque; independent of any vault, page or options. Free with cv_search_cursor_free(). */
typedef struct cv_search_cursor cv_search_cursor;
/* A copy of `cursor` (cv_search_cursor_free); NULL with *error for a bad handle. */
cv_search_cursor *cv_search_cursor_copy(const cv_search_cursor *cursor, cv_error **error);
/* Frees a cursor (NULL is ignored). */
void cv_search_cursor_free(cv_search_cursor *cursor);

/* What a search looks in and how its results come (CachedSearchOptions): every conversation,
 * newest first, 20 a page, until a setter says otherwise. Each setter returns false with *error
 * (CV_ERROR_DOMAIN_ARGUMENT, the options unchanged) for a bad handle or value. A search copies the
 * options: change or free them after it starts. Free with cv_search_options_free(). */
typedef struct cv_search_options cv_search_options;
/* New options with the defaults (never NULL). */
cv_search_options *cv_search_options_new(void);
/* Frees options (NULL is ignored). */
void cv_search_options_free(cv_search_options *options);
/* Only the conversation with a user (CV_RECEIVER_USER, a uid) or a group's (a guid); `id` NULL:
 * every cached conversation again. */
bool cv_search_options_set_conversation(cv_search_options *options, cv_receiver_type type, const char *id, cv_error **error);
/* Only messages sent by `uid`; NULL: anyone's. */
bool cv_search_options_set_sender(cv_search_options *options, const char *uid, cv_error **error);
/* Only messages of these categories ("message", "custom", …): a NULL-terminated array of at most 100
 * non-empty strings, copied; NULL or an empty array: any category. */
bool cv_search_options_set_categories(cv_search_options *options, const char *const *categories, cv_error **error);
/* Only messages of these types ("text", "image", "video", "audio", "file", a custom type…), as
 * cv_search_options_set_categories takes them; NULL or empty: any type. */
bool cv_search_options_set_types(cv_search_options *options, const char *const *types, cv_error **error);
/* Only messages sent at or after `sent_after` and before `sent_before` (seconds since 1970; 0: no
 * bound on that side). Negative values are refused. */
bool cv_search_options_set_time_range(cv_search_options *options, int64_t sent_after, int64_t sent_before, cv_error **error);
/* The order of the results; an out-of-range value is refused. */
bool cv_search_options_set_order(cv_search_options *options, cv_search_order order, cv_error **error);
/* Results a page, 1…100 (20 by default). */
bool cv_search_options_set_limit(cv_search_options *options, int limit, cv_error **error);
/* Go on from `cursor` (copied; a page's cv_search_page_get_next_cursor of the same query and
 * options); NULL: the first page again. */
bool cv_search_options_set_cursor(cv_search_options *options, const cv_search_cursor *cursor, cv_error **error);

/* A page of results (CachedSearchPage): the hits in the order asked, each a message and where the
 * query's words are in it. Immutable and independent of its vault (it may outlive it); every
 * accessor copies. Free with cv_search_page_free(). */
typedef struct cv_search_page cv_search_page;
/* Frees a page (NULL is ignored). */
void cv_search_page_free(cv_search_page *page);
/* How many hits the page holds (0 for a bad handle). Hits are numbered 0…count-1; a larger
 * `index` given to the accessors below is refused (CV_ERROR_DOMAIN_ARGUMENT). */
size_t cv_search_page_get_hit_count(const cv_search_page *page);
/* The hit's message as JSON text (the object cv_vault_fetch_messages_sync documents: "localPath"
 * set on a cached attachment); cv_free. NULL with *error for a bad handle or index. */
char *cv_search_page_get_message(const cv_search_page *page, size_t index, cv_error **error);
/* What of the message was searched: a text message's text, a media message's caption and file
 * names (one a line), a custom message's "conversationText"; cv_free. */
char *cv_search_page_get_text(const cv_search_page *page, size_t index, cv_error **error);
/* A short excerpt of the text around the first match (about 12 words, "…" where cut); cv_free. */
char *cv_search_page_get_snippet(const cv_search_page *page, size_t index, cv_error **error);
/* Where the query's words are in the hit's text or snippet, in order: *matches_out a new array of
 * *count_out matches, freed with cv_free(), or NULL with *count_out 0 when there is none. Returns false
 * with *error (outputs NULL and 0) for a bad handle, index or field. */
bool cv_search_page_get_matches(const cv_search_page *page, size_t index, cv_search_field field, cv_search_match **matches_out,
                                size_t *count_out, cv_error **error);
/* The cursor of the next page (cv_search_cursor_free), or NULL when this page is the last (and
 * *error untouched) or for a bad handle (with *error). */
cv_search_cursor *cv_search_page_get_next_cursor(const cv_search_page *page, cv_error **error);
/* How far the search index was built when the search ran: messages it held, messages cached, and
 * whether that was all of them (when not, older messages may be missing from the results: the
 * background build is under way). Any output may be NULL. False with *error for a bad handle. */
bool cv_search_page_get_index_progress(const cv_search_page *page, int64_t *indexed_out, int64_t *total_out, bool *complete_out,
                                       cv_error **error);

/* A search's answer, delivered through cv_vault_dispatch(): `page` (transfer full: the callback's,
 * freed with cv_search_page_free(), also when it is not read) or `error` (borrowed: valid during
 * the call), the other NULL. */
typedef void (*cv_search_callback)(cv_search_page *page, const cv_error *error, void *user_data);

/* Searches the cached messages for `query` with `options` (NULL: the defaults; copied now).
 * `callback` runs once through cv_vault_dispatch() with the page or the error; `destroy` runs once
 * after it, or at cv_vault_free() if the search has not answered (then `callback` never runs).
 * Returns false (with *error, no callback) only for a refused argument (a NULL or non-UTF-8 query
 * among them; an empty one is the search's ERROR_INVALID_SEARCH_QUERY). */
bool cv_vault_search_cached_messages(cv_vault *vault, const char *query, const cv_search_options *options,
                                     cv_search_callback callback, void *user_data, cv_destroy_notify destroy, cv_error **error);
/* The same search, waited for (a _sync call): the page (cv_search_page_free), or NULL with *error. */
cv_search_page *cv_vault_search_cached_messages_sync(cv_vault *vault, const char *query, const cv_search_options *options,
                                                     cv_error **error);

/* How far the search index of the open cache is built (OfflineVault.searchIndexProgress). A cache
 * opened with messages the index does not hold (one from before the index) is indexed in the
 * background after login; new messages are indexed as they are cached. The counts are read from
 * the cache when called (messages in the index, messages cached). Any output may be NULL.
 * False with *error: ERROR_OFFLINE_DISABLED when no cache is open, or a bad handle. */
bool cv_vault_get_search_index_progress(cv_vault *vault, int64_t *indexed_out, int64_t *total_out, bool *complete_out,
                                        cv_error **error);
/* Waits until every cached message is in the index (at once when it is, or when no cache is
 * open), dispatching as every _sync call does. False with *error only for a bad handle. */
bool cv_vault_wait_for_search_index_sync(cv_vault *vault, cv_error **error);

/* The background build's progress (SearchIndexListener): every few hundred messages, and once
 * complete after each login (`complete` true, `indexed` == `total`). */
typedef void (*cv_search_index_callback)(int64_t indexed, int64_t total, bool complete, void *user_data);
/* Registers a search index listener; its id (> 0), or 0 with *error. Removed with cv_vault_remove_listener(). */
unsigned cv_vault_add_search_index_listener(cv_vault *vault, cv_search_index_callback callback, void *user_data,
                                            cv_destroy_notify destroy, cv_error **error);

/* ------------------------------------------------------------------------------------------ */
/* Dispatching the vault's callbacks                                                            */

/* A file descriptor that is readable while callbacks are due (poll it for input); owned by the
 * vault, valid until cv_vault_free(). -1 for a bad handle. */
int cv_vault_get_fd(cv_vault *vault);
/* Runs the callbacks that are due, on the calling thread; answers how many ran. */
unsigned cv_vault_dispatch(cv_vault *vault);

#ifdef __cplusplus
}
#endif

#endif /* CHATVAULT_CHATVAULT_H */
