/* chatvault.vapi: ChatVault (libchatvault, chatvault/chatvault.h) for Vala, as libsecret ships
 * libsecret-1.vapi. Installed by Scripts/install into PREFIX/share/vala/vapi.
 *
 *     valac --pkg chatvault --pkg glib-2.0 app.vala
 *
 * Errors come back in an `out ChatVault.Error?` (freed with cv_error_free); strings the library
 * returns are the caller's (freed with g_free, which is free). */
[CCode (cheader_filename = "chatvault/chatvault.h")]
namespace ChatVault {
	[CCode (cname = "cv_version")]
	public unowned string version ();

	[Compact]
	[CCode (cname = "cv_error", free_function = "cv_error_free", has_type_id = false)]
	public class Error {
		public string domain;
		public string code;
		public string message;
		public string? details;
	}

	[CCode (cname = "cv_receiver_type", cprefix = "CV_RECEIVER_", has_type_id = false)]
	public enum ReceiverType { USER, GROUP }

	[CCode (cname = "cv_open_state", cprefix = "CV_OPEN_", has_type_id = false)]
	public enum OpenState { LOGGED_OUT, DISABLED, OPENING, READY, PLAINTEXT_FALLBACK, UNAVAILABLE, ONLINE_ONLY }

	[CCode (cname = "cv_reset_reason", cprefix = "CV_RESET_", has_type_id = false)]
	public enum ResetReason { KEY_LOST, WRONG_KEY, CORRUPTED, ESCALATED, ENCRYPTION_CHANGED }

	[CCode (cname = "cv_sync_state", cprefix = "CV_SYNC_", has_type_id = false)]
	public enum SyncState { IDLE, SYNCING }

	[CCode (cname = "cv_request_kind", cprefix = "CV_REQUEST_", has_type_id = false)]
	public enum RequestKind { MESSAGES, CONVERSATIONS, THREADS, USERS, GROUPS, GROUP_MEMBERS }

	[CCode (cname = "cv_media_type", cprefix = "CV_MEDIA_", has_type_id = false)]
	public enum MediaType { IMAGE, VIDEO, AUDIO, FILE }

	[CCode (cname = "cv_media_caching_mode", cprefix = "CV_MEDIA_CACHING_", has_type_id = false)]
	public enum MediaCachingMode { AUTO, OFF }

	[CCode (cname = "cv_media_event", cprefix = "CV_MEDIA_", has_type_id = false)]
	public enum MediaEvent { DOWNLOADED, DOWNLOAD_FAILED }

	[CCode (cname = "cv_sync_event", cprefix = "CV_SYNC_EVENT_", has_type_id = false)]
	public enum SyncEvent { CONVERSATIONS_STARTED, CONVERSATIONS_COMPLETED, CONVERSATIONS_FAILED, MESSAGES_STARTED, MESSAGES_COMPLETED,
	                        MESSAGES_FAILED }

	[CCode (cname = "cv_media_callback", has_target = true)]
	public delegate void MediaCallback (MediaEvent event, string? message_id, string? url, string? local_path, ChatVault.Error? error);
	[CCode (cname = "cv_sync_callback", has_target = true)]
	public delegate void SyncCallback (SyncEvent event, string payload_json, ChatVault.Error? error);

	[CCode (cname = "cv_reset_callback", has_target = true)]
	public delegate void ResetCallback (ResetReason reason, int pending_messages_lost);
	[CCode (cname = "cv_send_callback", has_target = true)]
	public delegate void SendCallback (string stage, string message_json, ChatVault.Error? error);
	[CCode (cname = "cv_message_callback", has_target = true)]
	public delegate void MessageCallback (string event, string message_json);
	[CCode (cname = "cv_outbox_event", cprefix = "CV_OUTBOX_", has_type_id = false)]
	public enum OutboxEvent { PENDING, SENT, FAILED }

	[CCode (cname = "cv_failure_reason", cprefix = "CV_FAILURE_", has_type_id = false)]
	public enum FailureReason { NONE, TRANSIENT, PERMANENT, QUEUE_OVERFLOW, QUEUE_FULL, BYTE_OVERFLOW, DISCARDED }

	[CCode (cname = "cv_outbox_callback", has_target = true)]
	public delegate void OutboxCallback (OutboxEvent event, string message_json, FailureReason reason);

	[CCode (cname = "cv_search_order", cprefix = "CV_SEARCH_ORDER_", has_type_id = false)]
	public enum SearchOrder { NEWEST_FIRST, OLDEST_FIRST, RELEVANCE }

	[CCode (cname = "cv_search_field", cprefix = "CV_SEARCH_FIELD_", has_type_id = false)]
	public enum SearchField { TEXT, SNIPPET }

	/* A word found: `length` bytes from byte `start` (as Vala's string.substring counts). */
	[CCode (cname = "cv_search_match", has_type_id = false)]
	public struct SearchMatch {
		public size_t start;
		public size_t length;
	}

	[CCode (cname = "cv_search_callback", has_target = true)]
	public delegate void SearchCallback (owned SearchPage? page, ChatVault.Error? error);
	[CCode (cname = "cv_search_index_callback", has_target = true)]
	public delegate void SearchIndexCallback (int64 indexed, int64 total, bool complete);

	/* Where the next page of a search starts (SearchPage.get_next_cursor). */
	[Compact]
	[CCode (cname = "cv_search_cursor", free_function = "cv_search_cursor_free", has_type_id = false)]
	public class SearchCursor {
		[CCode (cname = "cv_search_cursor_copy")]
		public SearchCursor? copy (out ChatVault.Error? error = null);
	}

	/* What a local search looks in and how its results come (copied by each search). */
	[Compact]
	[CCode (cname = "cv_search_options", free_function = "cv_search_options_free", has_type_id = false)]
	public class SearchOptions {
		[CCode (cname = "cv_search_options_new")]
		public SearchOptions ();
		[CCode (cname = "cv_search_options_set_conversation")]
		public bool set_conversation (ReceiverType type, string? id, out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_options_set_sender")]
		public bool set_sender (string? uid, out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_options_set_categories")]
		public bool set_categories ([CCode (array_length = false, array_null_terminated = true)] string[]? categories,
		                            out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_options_set_types")]
		public bool set_types ([CCode (array_length = false, array_null_terminated = true)] string[]? types,
		                       out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_options_set_time_range")]
		public bool set_time_range (int64 sent_after, int64 sent_before, out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_options_set_order")]
		public bool set_order (SearchOrder order, out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_options_set_limit")]
		public bool set_limit (int limit, out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_options_set_cursor")]
		public bool set_cursor (SearchCursor? cursor, out ChatVault.Error? error = null);
	}

	/* A page of local search results (independent of its vault). */
	[Compact]
	[CCode (cname = "cv_search_page", free_function = "cv_search_page_free", has_type_id = false)]
	public class SearchPage {
		[CCode (cname = "cv_search_page_get_hit_count")]
		public size_t get_hit_count ();
		[CCode (cname = "cv_search_page_get_message")]
		public string? get_message (size_t index, out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_page_get_text")]
		public string? get_text (size_t index, out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_page_get_snippet")]
		public string? get_snippet (size_t index, out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_page_get_matches")]
		public bool get_matches (size_t index, SearchField field, [CCode (array_length_type = "size_t")] out SearchMatch[]? matches,
		                         out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_page_get_next_cursor")]
		public SearchCursor? get_next_cursor (out ChatVault.Error? error = null);
		[CCode (cname = "cv_search_page_get_index_progress")]
		public bool get_index_progress (out int64 indexed, out int64 total, out bool complete, out ChatVault.Error? error = null);
	}

	[Compact]
	[CCode (cname = "cv_simulator", free_function = "cv_simulator_free", has_type_id = false)]
	public class Simulator {
		[CCode (cname = "cv_simulator_new")]
		public Simulator (uint64 seed);
		[CCode (cname = "cv_simulator_add_user")]
		public bool add_user (string uid, string name, out ChatVault.Error? error = null);
		[CCode (cname = "cv_simulator_post_text")]
		public bool post_text (string from_uid, ReceiverType receiver_type, string receiver, string text, out int64 id = null,
		                       out ChatVault.Error? error = null);
		[CCode (cname = "cv_simulator_set_online")]
		public bool set_online (string uid, bool online, out ChatVault.Error? error = null);
		[CCode (cname = "cv_simulator_post_media")]
		public bool post_media (string from_uid, ReceiverType receiver_type, string receiver, MediaType media_type, string file_path,
		                        string? mime_type, string? caption, out int64 id = null, out string? url = null,
		                        out ChatVault.Error? error = null);
		[CCode (cname = "cv_simulator_add_group")]
		public bool add_group (string guid, string name, string? owner, out ChatVault.Error? error = null);
		[CCode (cname = "cv_simulator_add_member")]
		public bool add_member (string guid, string uid, out ChatVault.Error? error = null);
		[CCode (cname = "cv_simulator_post_reply")]
		public bool post_reply (string from_uid, ReceiverType receiver_type, string receiver, int64 parent_id, string text,
		                        out int64 id = null, out ChatVault.Error? error = null);
	}

	/* A paged, two-phase read that remembers where it is (cv_request_new's query keys). */
	[Compact]
	[CCode (cname = "cv_request", free_function = "cv_request_free", has_type_id = false)]
	public class Request {
		[CCode (cname = "cv_request_new")]
		public static Request? create (Vault vault, RequestKind kind, string query_json, out ChatVault.Error? error = null);
		[CCode (cname = "cv_request_fetch_next_sync")]
		public string? fetch_next_sync (out ChatVault.Error? error = null);
		[CCode (cname = "cv_request_fetch_previous_sync")]
		public string? fetch_previous_sync (out ChatVault.Error? error = null);
	}

	[Compact]
	[CCode (cname = "cv_vault", free_function = "cv_vault_free", has_type_id = false)]
	public class Vault {
		[CCode (cname = "cv_vault_new_simulated")]
		public static Vault? new_simulated (string settings_json, Simulator simulator, string uid, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_new_matrix_sync")]
		public static Vault? new_matrix_sync (string settings_json, string homeserver, string user_id, int password_fd,
		                                      out ChatVault.Error? error = null);

		[CCode (cname = "cv_vault_login_sync")]
		public OpenState login_sync (string uid, out string? detail = null, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_logout_sync")]
		public bool logout_sync (out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_retry_open_sync")]
		public OpenState retry_open_sync (out string? detail = null, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_is_offline_enabled")]
		public bool is_offline_enabled ();
		[CCode (cname = "cv_vault_get_encryption_status")]
		public string? get_encryption_status (out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_get_audit_journal")]
		public string? get_audit_journal (out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_get_cache_size")]
		public int64 get_cache_size (out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_clear_offline_cache_sync")]
		public bool clear_offline_cache_sync (out ChatVault.Error? error = null);

		[CCode (cname = "cv_vault_fetch_messages_sync")]
		public string? fetch_messages_sync (ReceiverType receiver_type, string receiver, int limit, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_fetch_conversations_sync")]
		public string? fetch_conversations_sync (int limit, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_get_message_sync")]
		public string? get_message_sync (int64 message_id, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_get_conversation_sync")]
		public string? get_conversation_sync (ReceiverType type, string with, out ChatVault.Error? error = null);

		[CCode (cname = "cv_vault_send_text")]
		public bool send_text (ReceiverType receiver_type, string receiver, string text, owned SendCallback callback,
		                       out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_send_media")]
		public bool send_media (ReceiverType receiver_type, string receiver, string file_path, MediaType media_type, string? caption,
		                        owned SendCallback callback, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_send_custom")]
		public bool send_custom (ReceiverType receiver_type, string receiver, string custom_type, string custom_data_json,
		                         owned SendCallback callback, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_get_media_caching_mode")]
		public MediaCachingMode get_media_caching_mode (out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_get_cached_media_path")]
		public string? get_cached_media_path (string url, out ChatVault.Error? error = null);
		/* cv_vault_download_media (two callbacks sharing one user_data) is not bound: call the C
		 * function, or use get_cached_media_path and the media listener. */
		[CCode (cname = "cv_vault_add_media_listener")]
		public uint add_media_listener (owned MediaCallback callback, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_add_sync_listener")]
		public uint add_sync_listener (owned SyncCallback callback, out ChatVault.Error? error = null);

		/* Key management: reports as JSON; secrets only through descriptors. */
		[CCode (cname = "cv_vault_rotate_key_sync")]
		public string? rotate_key_sync (out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_move_key_sync")]
		public string? move_key_sync (string store_name, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_create_recovery_secret_sync")]
		public string? create_recovery_secret_sync (int secret_fd, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_recover_sync")]
		public string? recover_sync (int secret_fd, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_list_quarantined_caches_sync")]
		public string? list_quarantined_caches_sync (out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_restore_quarantined_cache_sync")]
		public string? restore_quarantined_cache_sync (string entry_id, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_export_cache_sync")]
		public string? export_cache_sync (string path, int secret_fd, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_import_cache_sync")]
		public string? import_cache_sync (string path, int secret_fd, out ChatVault.Error? error = null);

		/* Local search of the cached messages (offline too). */
		[CCode (cname = "cv_vault_search_cached_messages")]
		public bool search_cached_messages (string query, SearchOptions? options, owned SearchCallback callback,
		                                    out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_search_cached_messages_sync")]
		public SearchPage? search_cached_messages_sync (string query, SearchOptions? options, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_get_search_index_progress")]
		public bool get_search_index_progress (out int64 indexed, out int64 total, out bool complete, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_wait_for_search_index_sync")]
		public bool wait_for_search_index_sync (out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_add_search_index_listener")]
		public uint add_search_index_listener (owned SearchIndexCallback callback, out ChatVault.Error? error = null);

		[CCode (cname = "cv_vault_get_pending_messages_sync")]
		public string? get_pending_messages_sync (out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_retry_message_sync")]
		public bool retry_message_sync (string local_id, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_discard_message_sync")]
		public bool discard_message_sync (string local_id, out ChatVault.Error? error = null);

		[CCode (cname = "cv_vault_force_sync_now_sync")]
		public bool force_sync_now_sync (out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_get_sync_state")]
		public SyncState get_sync_state ();
		[CCode (cname = "cv_vault_get_last_sync_timestamp")]
		public int64 get_last_sync_timestamp ();

		[CCode (cname = "cv_vault_add_reset_listener")]
		public uint add_reset_listener (owned ResetCallback callback, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_add_message_listener")]
		public uint add_message_listener (owned MessageCallback callback, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_add_outbox_listener")]
		public uint add_outbox_listener (owned OutboxCallback callback, out ChatVault.Error? error = null);
		[CCode (cname = "cv_vault_remove_listener")]
		public bool remove_listener (uint listener_id, out ChatVault.Error? error = null);

		[CCode (cname = "cv_vault_get_fd")]
		public int get_fd ();
		[CCode (cname = "cv_vault_dispatch")]
		public uint dispatch ();
		/* Dispatches on a GLib main context (null: the default one); answers the source id. */
		[CCode (cname = "cv_vault_attach_main_context", cheader_filename = "chatvault/chatvault-glib.h")]
		public uint attach_main_context (GLib.MainContext? context = null);
	}
}
