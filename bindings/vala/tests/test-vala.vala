/* ChatVault from Vala over the installed vapi (Scripts/test-capi): a simulator, a vault whose
 * callbacks run on the GLib main loop, a two-phase read, a send that resolves on the loop, a
 * listener removed, a bad argument as an error. Exits 0 when every check holds. */
int failures = 0;

void check (bool ok, string what) {
	if (!ok) {
		failures++;
		stderr.printf ("test-vala: FAILED %s\n", what);
	}
}

int main (string[] args) {
	if (args.length != 2) {
		stderr.printf ("usage: test-vala WORKDIR\n");
		return 2;
	}
	var root = args[1] + "/root";
	var keys = args[1] + "/keys";
	DirUtils.create (root, 0700);
	DirUtils.create (keys, 0700);
	check (ChatVault.version ().contains ("."), "a version");

	var server = new ChatVault.Simulator (9);
	server.add_user ("alice", "Alice");
	server.add_user ("bob", "Bob");
	server.post_text ("bob", ChatVault.ReceiverType.USER, "alice", "hello from bob");

	ChatVault.Error? error = null;
	var bad = ChatVault.Vault.new_simulated ("{\"applicationId\": \"x\", \"bogus\": 1}", server, "alice", out error);
	check (bad == null && error != null && error.code == "ERR_INVALID_ARGUMENT", "an unknown settings key is an argument error");

	var settings = "{\"enabled\": true, \"encryption\": true, \"applicationId\": \"org.chatvault.valatest\", \"rootDirectory\": \"%s\", \"keyStore\": \"software\", \"keyDirectory\": \"%s\"}".printf (root, keys);
	var vault = ChatVault.Vault.new_simulated (settings, server, "alice", out error);
	check (vault != null, "a vault");
	if (vault == null)
		return 1;
	var loop = new MainLoop ();
	var source = vault.attach_main_context (null);
	var main_thread = Thread.self<void> ();

	string? detail = null;
	check (vault.login_sync ("alice", out detail) == ChatVault.OpenState.READY, "ready");
	check (vault.is_offline_enabled (), "offline enabled");
	var page = vault.fetch_messages_sync (ChatVault.ReceiverType.USER, "bob", 30);
	check (page != null && page.contains ("hello from bob"), "the server phase");

	int heard = 0;
	var listener = vault.add_message_listener ((event, message) => {
		if (event == "received") heard++;
	});
	check (listener > 0, "a message listener");

	string[] stages = {};
	bool on_main = true;
	vault.send_text (ChatVault.ReceiverType.USER, "bob", "hi from vala", (stage, message, err) => {
		stages += stage;
		on_main = on_main && Thread.self<void> () == main_thread;
		if (stage == "sent" || stage == "error") loop.quit ();
	});
	Timeout.add_seconds (20, () => { loop.quit (); return Source.REMOVE; });
	loop.run ();
	check (stages.length == 2 && stages[0] == "pending" && stages[1] == "sent", "pending then sent on the loop");
	check (on_main, "the callbacks ran on the main loop's thread");

	server.post_text ("bob", ChatVault.ReceiverType.USER, "alice", "live");
	Timeout.add (50, () => {
		if (heard > 0) { loop.quit (); return Source.REMOVE; }
		return Source.CONTINUE;
	});
	Timeout.add_seconds (10, () => { loop.quit (); return Source.REMOVE; });
	loop.run ();
	check (heard == 1, "the realtime message on the loop");
	check (vault.remove_listener (listener), "removed");
	check (!vault.remove_listener (listener, out error) && error != null, "not twice");

	/* A paged read backwards: the newest two, then the one before them, none twice. */
	ChatVault.Error? refused = null;
	check (ChatVault.Request.create (vault, ChatVault.RequestKind.MESSAGES, "{\"uid\": \"bob\", \"limit\": 0}", out refused) == null
	       && refused != null && refused.code == "ERR_INVALID_ARGUMENT", "a limit of 0 is refused");
	var older = ChatVault.Request.create (vault, ChatVault.RequestKind.MESSAGES, "{\"uid\": \"bob\", \"limit\": 2}");
	check (older != null, "a message request");
	var first = older.fetch_previous_sync ();
	var second = older.fetch_previous_sync ();
	check (first != null && first.contains ("live") && first.contains ("hi from vala"), "the newest two first");
	check (second != null && second.contains ("hello from bob") && !second.contains ("\"text\":\"live\""), "then the one before");
	var conversation = vault.get_conversation_sync (ChatVault.ReceiverType.USER, "bob");
	check (conversation != null && conversation.contains ("\"with\":\"bob\""), "a conversation lookup");
	older = null; /* cv_request_free */

	/* A custom send and the sync listener, both on the loop. */
	string? custom_json = null;
	vault.send_custom (ChatVault.ReceiverType.USER, "bob", "location", "{\"lat\": 52.5}", (stage, message, err) => {
		if (stage == "sent") { custom_json = message; loop.quit (); }
		if (stage == "error") loop.quit ();
	});
	Timeout.add_seconds (20, () => { loop.quit (); return Source.REMOVE; });
	loop.run ();
	check (custom_json != null && custom_json.contains ("\"customType\":\"location\"") && custom_json.contains ("\"lat\":52.5"),
	       "a custom send with its type and data");
	ChatVault.SyncEvent[] events = {};
	vault.add_sync_listener ((event, payload, err) => { events += event; });
	bool forced = false;
	for (int attempt = 0; attempt < 300 && !forced; attempt++) {
		ChatVault.Error? busy = null;
		forced = vault.force_sync_now_sync (out busy);
		if (!forced) Thread.usleep (50000);
	}
	var until = get_monotonic_time () + 10 * 1000000;
	while (get_monotonic_time () < until && !(ChatVault.SyncEvent.MESSAGES_COMPLETED in events))
		MainContext.default ().iteration (false);
	check (forced && ChatVault.SyncEvent.MESSAGES_COMPLETED in events, "the sync listener heard a forced sweep");

	/* Local search: matches as byte offsets (string.substring's), two pages through the cursor, a
	 * query error, the asynchronous form and the index listener on the loop. */
	var options = new ChatVault.SearchOptions ();
	check (options.set_conversation (ChatVault.ReceiverType.USER, "bob") && options.set_limit (1), "search options");
	var found = vault.search_cached_messages_sync ("hello", options, out error);
	check (found != null && found.get_hit_count () == 1, "hello found");
	if (found != null && found.get_hit_count () == 1) {
		var found_text = found.get_text (0);
		ChatVault.SearchMatch[]? marks = null;
		check (found.get_matches (0, ChatVault.SearchField.TEXT, out marks) && marks != null && marks.length == 1, "one match");
		if (marks != null && marks.length == 1)
			check (found_text.substring ((long) marks[0].start, (long) marks[0].length) == "hello", "the match slices out the word");
		check (found.get_next_cursor () == null, "a single page");
	}
	var first_page = vault.search_cached_messages_sync ("from", options);
	var cursor = first_page.get_next_cursor ();
	check (first_page.get_hit_count () == 1 && cursor != null, "a first page and its cursor");
	check (options.set_cursor (cursor), "the cursor set");
	var last_page = vault.search_cached_messages_sync ("from", options);
	check (last_page.get_hit_count () == 1 && last_page.get_next_cursor () == null, "the last page");
	check (first_page.get_message (0) != last_page.get_message (0), "two messages, each once");
	ChatVault.Error? query_error = null;
	check (vault.search_cached_messages_sync ("  ", null, out query_error) == null && query_error != null
	       && query_error.code == "ERROR_INVALID_SEARCH_QUERY" && query_error.details == "empty", "an empty query is refused, saying why");
	size_t async_hits = 0;
	bool answered = false, answer_on_main = false;
	vault.search_cached_messages ("live", null, (page, err) => {
		answered = true;
		answer_on_main = Thread.self<void> () == main_thread;
		async_hits = page != null ? page.get_hit_count () : 0;
	});
	until = get_monotonic_time () + 10 * 1000000;
	while (get_monotonic_time () < until && !answered)
		MainContext.default ().iteration (false);
	check (answered && answer_on_main && async_hits == 1, "the asynchronous search answered on the loop");
	bool index_complete = false;
	var index_listener = vault.add_search_index_listener ((indexed, total, complete) => {
		index_complete = complete && indexed == total && total > 0;
	});
	check (vault.logout_sync () && vault.login_sync ("alice") == ChatVault.OpenState.READY, "logged in again");
	until = get_monotonic_time () + 10 * 1000000;
	while (get_monotonic_time () < until && !index_complete)
		MainContext.default ().iteration (false);
	int64 indexed_now = 0, total_now = 0;
	bool complete_now = false;
	check (index_complete && vault.get_search_index_progress (out indexed_now, out total_now, out complete_now) && complete_now,
	       "the index listener heard it complete");
	check (vault.remove_listener (index_listener), "the index listener removed");

	/* Key management: a rotation's report, an empty quarantine. */
	var rotated = vault.rotate_key_sync (out error);
	check (rotated != null && rotated.contains ("\"newKeyId\""), "a rotation report");
	var quarantined = vault.list_quarantined_caches_sync (out error);
	check (quarantined == "[]", "nothing quarantined");
	check (vault.get_media_caching_mode () == ChatVault.MediaCachingMode.AUTO, "media caching on by default");

	Source.remove (source);
	vault = null; /* cv_vault_free */
	if (failures == 0)
		print ("test-vala: all checks passed\n");
	return failures == 0 ? 0 : 1;
}
