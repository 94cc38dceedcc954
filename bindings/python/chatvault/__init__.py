"""ChatVault from Python: a ctypes binding of libchatvault (the C ABI, chatvault/chatvault.h).

    import asyncio, chatvault

    with chatvault.Simulator(seed=7) as server:
        server.add_user("alice", "Alice"); server.add_user("bob", "Bob")
        with chatvault.Vault(server, "alice", applicationId="org.example.Chat", enabled=True, encryption=True) as vault:
            vault.on_reset(lambda reason, lost: print("reset", reason, lost))
            state, detail = vault.login("alice")
            page = vault.fetch_messages("bob")                 # {"cached": [...], "server": [...], "serverError": ...}
            sent = await vault.send_text("bob", "hi")          # resolves on "sent" (with an asyncio loop attached)
            found = vault.search("train", conversation="bob")  # a SearchPage of the cached messages, offline too

Errors raise ChatVaultError (its .domain and .code are the C error's). Callbacks run only when the
vault is dispatched: vault.attach_asyncio() (the running loop reads the vault's descriptor) or
vault.dispatch() from your own loop; vault.attach_glib(context) for a GLib main context.

The library is found through CHATVAULT_LIBRARY (a path), else pkg-config's libdir for chatvault,
else the system's loader.
"""
import ctypes
import enum
import json
import os
import subprocess

__all__ = ["ChatVaultError", "OpenState", "ResetReason", "SearchCursor", "SearchPage", "Simulator", "Vault", "library"]


class ChatVaultError(Exception):
    """A cv_error: domain ("chatvault", "chatvault-argument"), code (ERROR_… / ERR_…), message, and
    details (a stable word saying more, or None: for ERROR_INVALID_SEARCH_QUERY "empty",
    "onlyExclusions", "tooLong" or "tooManyTerms")."""

    def __init__(self, domain, code, message, details=None):
        super().__init__(f"{code}: {message}")
        self.domain, self.code, self.message, self.details = domain, code, message, details


class OpenState(enum.IntEnum):
    LOGGED_OUT = 0
    DISABLED = 1
    OPENING = 2
    READY = 3
    PLAINTEXT_FALLBACK = 4
    UNAVAILABLE = 5
    ONLINE_ONLY = 6


class SyncEvent(enum.IntEnum):
    CONVERSATIONS_STARTED = 0
    CONVERSATIONS_COMPLETED = 1
    CONVERSATIONS_FAILED = 2
    MESSAGES_STARTED = 3
    MESSAGES_COMPLETED = 4
    MESSAGES_FAILED = 5


MEDIA_TYPES = {"image": 0, "video": 1, "audio": 2, "file": 3}


class ResetReason(enum.IntEnum):
    KEY_LOST = 0
    WRONG_KEY = 1
    CORRUPTED = 2
    ESCALATED = 3
    ENCRYPTION_CHANGED = 4


class _Error(ctypes.Structure):
    _fields_ = [("domain", ctypes.c_char_p), ("code", ctypes.c_char_p), ("message", ctypes.c_char_p), ("details", ctypes.c_char_p)]


_ErrorOut = ctypes.POINTER(ctypes.POINTER(_Error))
_DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_RESET = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_SEND = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_Error), ctypes.c_void_p)
_MESSAGE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)
_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p)
_DOWNLOAD = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.POINTER(_Error), ctypes.c_void_p)
_SYNC = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_Error), ctypes.c_void_p)
_SEARCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_Error), ctypes.c_void_p)
_SEARCH_INDEX = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_bool, ctypes.c_void_p)


class _Match(ctypes.Structure):
    _fields_ = [("start", ctypes.c_size_t), ("length", ctypes.c_size_t)]


def _find():
    if os.environ.get("CHATVAULT_LIBRARY"):
        return os.environ["CHATVAULT_LIBRARY"]
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "chatvault"], capture_output=True, text=True, check=True).stdout.strip()
        candidate = os.path.join(libdir, "libchatvault.so.0")
        if os.path.exists(candidate):
            return candidate
    except (OSError, subprocess.CalledProcessError):
        pass
    return "libchatvault.so.0"


library = ctypes.CDLL(_find())
_V = ctypes.c_void_p


def _sig(name, restype, *argtypes):
    f = getattr(library, name)
    f.restype, f.argtypes = restype, list(argtypes)
    return f


_free = _sig("cv_free", None, ctypes.c_void_p)
_error_free = _sig("cv_error_free", None, ctypes.POINTER(_Error))
_version = _sig("cv_version", ctypes.c_char_p)
_sim_new = _sig("cv_simulator_new", _V, ctypes.c_uint64)
_sim_free = _sig("cv_simulator_free", None, _V)
_sim_add = _sig("cv_simulator_add_user", ctypes.c_bool, _V, ctypes.c_char_p, ctypes.c_char_p, _ErrorOut)
_sim_post = _sig("cv_simulator_post_text", ctypes.c_bool, _V, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                 ctypes.POINTER(ctypes.c_int64), _ErrorOut)
_sim_online = _sig("cv_simulator_set_online", ctypes.c_bool, _V, ctypes.c_char_p, ctypes.c_bool, _ErrorOut)
_sim_post_media = _sig("cv_simulator_post_media", ctypes.c_bool, _V, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                       ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64),
                       ctypes.POINTER(ctypes.c_void_p), _ErrorOut)
_vault_new = _sig("cv_vault_new_simulated", _V, ctypes.c_char_p, _V, ctypes.c_char_p, _ErrorOut)
_vault_free = _sig("cv_vault_free", None, _V)
_login = _sig("cv_vault_login_sync", ctypes.c_int, _V, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), _ErrorOut)
_logout = _sig("cv_vault_logout_sync", ctypes.c_bool, _V, _ErrorOut)
_enabled = _sig("cv_vault_is_offline_enabled", ctypes.c_bool, _V)
_status = _sig("cv_vault_get_encryption_status", ctypes.c_void_p, _V, _ErrorOut)
_journal = _sig("cv_vault_get_audit_journal", ctypes.c_void_p, _V, _ErrorOut)
_fetch = _sig("cv_vault_fetch_messages_sync", ctypes.c_void_p, _V, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, _ErrorOut)
_conversations = _sig("cv_vault_fetch_conversations_sync", ctypes.c_void_p, _V, ctypes.c_int, _ErrorOut)
_send = _sig("cv_vault_send_text", ctypes.c_bool, _V, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, _SEND, ctypes.c_void_p, _DESTROY, _ErrorOut)
_pending = _sig("cv_vault_get_pending_messages_sync", ctypes.c_void_p, _V, _ErrorOut)
_add_reset = _sig("cv_vault_add_reset_listener", ctypes.c_uint, _V, _RESET, ctypes.c_void_p, _DESTROY, _ErrorOut)
_add_message = _sig("cv_vault_add_message_listener", ctypes.c_uint, _V, _MESSAGE, ctypes.c_void_p, _DESTROY, _ErrorOut)
_remove = _sig("cv_vault_remove_listener", ctypes.c_bool, _V, ctypes.c_uint, _ErrorOut)
_request_new = _sig("cv_request_new", _V, _V, ctypes.c_int, ctypes.c_char_p, _ErrorOut)
_request_free = _sig("cv_request_free", None, _V)
_request_next = _sig("cv_request_fetch_next_sync", ctypes.c_void_p, _V, _ErrorOut)
_request_previous = _sig("cv_request_fetch_previous_sync", ctypes.c_void_p, _V, _ErrorOut)
_get_message = _sig("cv_vault_get_message_sync", ctypes.c_void_p, _V, ctypes.c_int64, _ErrorOut)
_get_conversation = _sig("cv_vault_get_conversation_sync", ctypes.c_void_p, _V, ctypes.c_int, ctypes.c_char_p, _ErrorOut)
_send_media = _sig("cv_vault_send_media", ctypes.c_bool, _V, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                   ctypes.c_char_p, _SEND, ctypes.c_void_p, _DESTROY, _ErrorOut)
_send_custom = _sig("cv_vault_send_custom", ctypes.c_bool, _V, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                    _SEND, ctypes.c_void_p, _DESTROY, _ErrorOut)
_cached_media = _sig("cv_vault_get_cached_media_path", ctypes.c_void_p, _V, ctypes.c_char_p, _ErrorOut)
_download = _sig("cv_vault_download_media", ctypes.c_bool, _V, ctypes.c_char_p, ctypes.c_int64, _PROGRESS, _DOWNLOAD,
                 ctypes.c_void_p, _DESTROY, _ErrorOut)
_add_sync = _sig("cv_vault_add_sync_listener", ctypes.c_uint, _V, _SYNC, ctypes.c_void_p, _DESTROY, _ErrorOut)
_cursor_copy = _sig("cv_search_cursor_copy", _V, _V, _ErrorOut)
_cursor_free = _sig("cv_search_cursor_free", None, _V)
_options_new = _sig("cv_search_options_new", _V)
_options_free = _sig("cv_search_options_free", None, _V)
_options_conversation = _sig("cv_search_options_set_conversation", ctypes.c_bool, _V, ctypes.c_int, ctypes.c_char_p, _ErrorOut)
_options_sender = _sig("cv_search_options_set_sender", ctypes.c_bool, _V, ctypes.c_char_p, _ErrorOut)
_options_categories = _sig("cv_search_options_set_categories", ctypes.c_bool, _V, ctypes.POINTER(ctypes.c_char_p), _ErrorOut)
_options_types = _sig("cv_search_options_set_types", ctypes.c_bool, _V, ctypes.POINTER(ctypes.c_char_p), _ErrorOut)
_options_time = _sig("cv_search_options_set_time_range", ctypes.c_bool, _V, ctypes.c_int64, ctypes.c_int64, _ErrorOut)
_options_order = _sig("cv_search_options_set_order", ctypes.c_bool, _V, ctypes.c_int, _ErrorOut)
_options_limit = _sig("cv_search_options_set_limit", ctypes.c_bool, _V, ctypes.c_int, _ErrorOut)
_options_cursor = _sig("cv_search_options_set_cursor", ctypes.c_bool, _V, _V, _ErrorOut)
_page_free = _sig("cv_search_page_free", None, _V)
_page_count = _sig("cv_search_page_get_hit_count", ctypes.c_size_t, _V)
_page_message = _sig("cv_search_page_get_message", ctypes.c_void_p, _V, ctypes.c_size_t, _ErrorOut)
_page_text = _sig("cv_search_page_get_text", ctypes.c_void_p, _V, ctypes.c_size_t, _ErrorOut)
_page_snippet = _sig("cv_search_page_get_snippet", ctypes.c_void_p, _V, ctypes.c_size_t, _ErrorOut)
_page_matches = _sig("cv_search_page_get_matches", ctypes.c_bool, _V, ctypes.c_size_t, ctypes.c_int,
                     ctypes.POINTER(ctypes.POINTER(_Match)), ctypes.POINTER(ctypes.c_size_t), _ErrorOut)
_page_cursor = _sig("cv_search_page_get_next_cursor", _V, _V, _ErrorOut)
_page_progress = _sig("cv_search_page_get_index_progress", ctypes.c_bool, _V, ctypes.POINTER(ctypes.c_int64),
                      ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_bool), _ErrorOut)
_search = _sig("cv_vault_search_cached_messages", ctypes.c_bool, _V, ctypes.c_char_p, _V, _SEARCH, ctypes.c_void_p, _DESTROY, _ErrorOut)
_search_sync = _sig("cv_vault_search_cached_messages_sync", _V, _V, ctypes.c_char_p, _V, _ErrorOut)
_index_progress = _sig("cv_vault_get_search_index_progress", ctypes.c_bool, _V, ctypes.POINTER(ctypes.c_int64),
                       ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_bool), _ErrorOut)
_index_wait = _sig("cv_vault_wait_for_search_index_sync", ctypes.c_bool, _V, _ErrorOut)
_add_search_index = _sig("cv_vault_add_search_index_listener", ctypes.c_uint, _V, _SEARCH_INDEX, ctypes.c_void_p, _DESTROY, _ErrorOut)
_fd = _sig("cv_vault_get_fd", ctypes.c_int, _V)
_dispatch = _sig("cv_vault_dispatch", ctypes.c_uint, _V)

USER, GROUP = 0, 1


def version():
    return _version().decode()


def _call(f, *args):
    """Calls a fallible C function with an error out-parameter; raises ChatVaultError on failure."""
    error = ctypes.POINTER(_Error)()
    result = f(*args, ctypes.byref(error))
    if error:
        e = error.contents
        exc = ChatVaultError(e.domain.decode(), e.code.decode(), e.message.decode(), e.details.decode() if e.details else None)
        _error_free(error)
        raise exc
    return result


def _exception(error):
    """A borrowed cv_error * as ChatVaultError (None for NULL)."""
    if not error:
        return None
    e = error.contents
    return ChatVaultError(e.domain.decode(), e.code.decode(), e.message.decode(), e.details.decode() if e.details else None)


def _text(pointer):
    """A returned char * as str (freed with cv_free)."""
    if not pointer:
        return None
    try:
        return ctypes.string_at(pointer).decode()
    finally:
        _free(pointer)


def _b(s):
    return s.encode() if isinstance(s, str) else s


class Simulator:
    """The in-process chat server (cv_simulator): for an app's own tests."""

    def __init__(self, seed=1):
        self._handle = _sim_new(seed)

    def add_user(self, uid, name):
        _call(_sim_add, self._handle, _b(uid), _b(name))

    def post_text(self, sender, receiver, text, group=False):
        out = ctypes.c_int64()
        _call(_sim_post, self._handle, _b(sender), GROUP if group else USER, _b(receiver), _b(text), ctypes.byref(out))
        return out.value

    def set_online(self, uid, online):
        _call(_sim_online, self._handle, _b(uid), online)

    def post_media(self, sender, receiver, path, media_type="image", mime_type="image/jpeg", caption=None, group=False):
        """A media message from a local file, as the server's truth: answers (id, url)."""
        out, url = ctypes.c_int64(), ctypes.c_void_p()
        _call(_sim_post_media, self._handle, _b(sender), GROUP if group else USER, _b(receiver), MEDIA_TYPES[media_type], _b(path),
              _b(mime_type), _b(caption) if caption is not None else None, ctypes.byref(out), ctypes.byref(url))
        return out.value, _text(url.value)

    def close(self):
        if self._handle:
            _sim_free(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SearchCursor:
    """Where the next page of a search starts (cv_search_cursor): SearchPage.next_cursor, given back
    to Vault.search(..., cursor=...) with the same query and options."""

    def __init__(self, handle):
        self._handle = handle

    def close(self):
        if self._handle:
            _cursor_free(self._handle)
            self._handle = None

    def __del__(self):
        if _cursor_free is not None:  # not at interpreter shutdown
            self.close()


class SearchPage:
    """A page of local search results, read out of a cv_search_page (which is freed at once).

    hits: a list of dicts {"message": message dict, "text", "snippet", "matches", "snippet_matches"},
    the matches as (start, length) pairs of str indices into "text" and "snippet" (the C API's UTF-8
    byte offsets converted): text[start:start + length] is the word found. next_cursor: a
    SearchCursor, or None on the last page. index_complete, indexed_messages, total_messages: how far
    the index was built when the search ran."""

    ORDERS = {"newest": 0, "oldest": 1, "relevance": 2}

    def __init__(self, handle):
        try:
            self.hits = [self._hit(handle, i) for i in range(_page_count(handle))]
            cursor = _call(_page_cursor, handle)
            self.next_cursor = SearchCursor(cursor) if cursor else None
            indexed, total, complete = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_bool()
            _call(_page_progress, handle, ctypes.byref(indexed), ctypes.byref(total), ctypes.byref(complete))
            self.indexed_messages, self.total_messages, self.index_complete = indexed.value, total.value, complete.value
        finally:
            _page_free(handle)

    @staticmethod
    def _matches(handle, index, field, text):
        marks, count = ctypes.POINTER(_Match)(), ctypes.c_size_t()
        _call(_page_matches, handle, index, field, ctypes.byref(marks), ctypes.byref(count))
        try:
            raw = text.encode()
            # Byte offsets into the UTF-8 → indices into the str.
            return [(len(raw[:m.start].decode()), len(raw[m.start:m.start + m.length].decode()))
                    for m in (marks[k] for k in range(count.value))]
        finally:
            _free(marks)

    @classmethod
    def _hit(cls, handle, index):
        text = _text(_call(_page_text, handle, index))
        snippet = _text(_call(_page_snippet, handle, index))
        return {"message": json.loads(_text(_call(_page_message, handle, index))), "text": text, "snippet": snippet,
                "matches": cls._matches(handle, index, 0, text), "snippet_matches": cls._matches(handle, index, 1, snippet)}


def _search_options(conversation=None, group=False, sender=None, categories=None, types=None, sent_after=0, sent_before=0,
                    order="newest", limit=20, cursor=None):
    """A cv_search_options from Vault.search's keyword arguments (the caller frees it)."""
    if order not in SearchPage.ORDERS:
        raise ValueError("order is one of " + ", ".join(SearchPage.ORDERS))
    options = _options_new()
    try:
        if conversation is not None:
            _call(_options_conversation, options, GROUP if group else USER, _b(conversation))
        if sender is not None:
            _call(_options_sender, options, _b(sender))
        for setter, values in ((_options_categories, categories), (_options_types, types)):
            if values:
                array = (ctypes.c_char_p * (len(values) + 1))(*[_b(v) for v in values], None)
                _call(setter, options, array)
        _call(_options_time, options, sent_after, sent_before)
        _call(_options_order, options, SearchPage.ORDERS[order])
        _call(_options_limit, options, limit)
        if cursor is not None:
            _call(_options_cursor, options, cursor._handle)
    except BaseException:
        _options_free(options)
        raise
    return options


class Request:
    """A paged, two-phase read (cv_request) that remembers where it is: made by Vault.request()."""

    KINDS = {"messages": 0, "conversations": 1, "threads": 2, "users": 3, "groups": 4, "members": 5}

    def __init__(self, vault, kind, query):
        if kind not in self.KINDS:
            raise ValueError("kind is one of " + ", ".join(self.KINDS))
        self._handle = _call(_request_new, vault._handle, self.KINDS[kind], _b(json.dumps(query)))

    def fetch_next(self):
        """{"cached": [...] | None, "server": [...] | None, "serverError": {...} | None}."""
        return json.loads(_text(_call(_request_next, self._handle)))

    def fetch_previous(self):
        """The previous (older) page of a message request."""
        return json.loads(_text(_call(_request_previous, self._handle)))

    def close(self):
        if self._handle:
            _request_free(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Vault:
    """A vault over a simulator's device (cv_vault). Keyword arguments are the settings JSON."""

    def __init__(self, simulator, uid, **settings):
        self._callbacks = {}  # ctypes callbacks kept alive while registered
        self._next = 0
        self._loop = None
        self._handle = _call(_vault_new, _b(json.dumps(settings)), simulator._handle, _b(uid))

    # -- the cache
    def login(self, uid):
        detail = ctypes.c_void_p()
        state = _call(_login, self._handle, _b(uid), ctypes.byref(detail))
        return OpenState(state), _text(detail.value)

    def logout(self):
        _call(_logout, self._handle)

    def is_offline_enabled(self):
        return bool(_enabled(self._handle))

    def encryption_status(self):
        return json.loads(_text(_call(_status, self._handle)))

    def audit_journal(self):
        """The cache's audit journal (opens, resets and their delivery, refusals), oldest first."""
        return json.loads(_text(_call(_journal, self._handle)))

    def fetch_messages(self, receiver, limit=30, group=False):
        return json.loads(_text(_call(_fetch, self._handle, GROUP if group else USER, _b(receiver), limit)))

    def fetch_conversations(self, limit=30):
        return json.loads(_text(_call(_conversations, self._handle, limit)))

    def pending_messages(self):
        return json.loads(_text(_call(_pending, self._handle)))

    def request(self, kind, **query):
        """A paged read: kind is messages, conversations, threads, users, groups or members;
        the keyword arguments are the query's keys (chatvault.h, cv_request_new)."""
        return Request(self, kind, query)

    def get_message(self, message_id):
        return json.loads(_text(_call(_get_message, self._handle, message_id)))

    def get_conversation(self, with_id, group=False):
        return json.loads(_text(_call(_get_conversation, self._handle, GROUP if group else USER, _b(with_id))))

    # -- local search
    def search(self, query, **options):
        """Searches the cached messages (offline too): a SearchPage. Options: conversation (a uid,
        or a guid with group=True), sender, categories, types, sent_after, sent_before (seconds),
        order ("newest", "oldest", "relevance"), limit (1…100), cursor (a page's next_cursor)."""
        handle = _search_options(**options)
        try:
            return SearchPage(_call(_search_sync, self._handle, _b(query), handle))
        finally:
            _options_free(handle)

    def search_async(self, query, on_page=None, **options):
        """The search through the vault's dispatch: with an asyncio loop attached, answers a future
        resolved with the SearchPage (or failed with ChatVaultError); on_page(page, error) hears it
        either way."""
        future = self._loop.create_future() if self._loop is not None else None
        key = None

        def answer(page, error, _):
            result, err = (SearchPage(page) if page else None), _exception(error)
            if on_page is not None:
                on_page(result, err)
            if future is not None and not future.done():
                if err is not None:
                    future.set_exception(err)
                else:
                    future.set_result(result)

        c_answer = _SEARCH(answer)
        c_destroy = _DESTROY(lambda _: self._callbacks.pop(key, None))
        key = self._keep(c_answer, c_destroy)
        handle = _search_options(**options)
        try:
            _call(_search, self._handle, _b(query), handle, c_answer, None, c_destroy)
        except ChatVaultError:
            self._callbacks.pop(key, None)
            raise
        finally:
            _options_free(handle)
        return future

    def search_index_progress(self):
        """(indexed messages, cached messages, complete) of the open cache's search index."""
        indexed, total, complete = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_bool()
        _call(_index_progress, self._handle, ctypes.byref(indexed), ctypes.byref(total), ctypes.byref(complete))
        return indexed.value, total.value, complete.value

    def wait_for_search_index(self):
        """Blocks until every cached message is in the search index."""
        _call(_index_wait, self._handle)

    def on_search_index(self, function):
        """function(indexed, total, complete): the index's background build; answers the listener id."""
        c = _SEARCH_INDEX(lambda indexed, total, complete, _: function(indexed, total, bool(complete)))
        key = self._keep(c)
        listener = _call(_add_search_index, self._handle, c, None, ctypes.cast(None, _DESTROY))
        self._callbacks[("listener", listener)] = self._callbacks.pop(key)
        return listener

    # -- callbacks
    def _keep(self, *callbacks):
        self._next += 1
        self._callbacks[self._next] = callbacks
        return self._next

    def on_reset(self, function):
        """function(ResetReason, pending_messages_lost); answers the listener id."""
        c = _RESET(lambda reason, lost, _: function(ResetReason(reason), lost))
        key = self._keep(c)
        listener = _call(_add_reset, self._handle, c, None, ctypes.cast(None, _DESTROY))
        self._callbacks[("listener", listener)] = self._callbacks.pop(key)
        return listener

    def on_message(self, function):
        """function(event, message dict): "received", "edited", "deleted", "synced"."""
        c = _MESSAGE(lambda event, message, _: function(event.decode(), json.loads(message.decode())))
        key = self._keep(c)
        listener = _call(_add_message, self._handle, c, None, ctypes.cast(None, _DESTROY))
        self._callbacks[("listener", listener)] = self._callbacks.pop(key)
        return listener

    def remove_listener(self, listener):
        _call(_remove, self._handle, listener)
        self._callbacks.pop(("listener", listener), None)

    def on_sync(self, function):
        """function(SyncEvent, payload dict, ChatVaultError | None): each phase of a catch-up sweep."""
        def call(event, payload, error, _):
            function(SyncEvent(event), json.loads(payload.decode()), _exception(error))
        c = _SYNC(call)
        key = self._keep(c)
        listener = _call(_add_sync, self._handle, c, None, ctypes.cast(None, _DESTROY))
        self._callbacks[("listener", listener)] = self._callbacks.pop(key)
        return listener

    def send_text(self, receiver, text, on_stage=None, group=False):
        """A durable send. With an asyncio loop attached, answers a future resolved with the sent
        message (or failed with ChatVaultError; an offline send stays queued and resolves on
        reconnect); on_stage(stage, message, error) hears every stage either way."""
        return self._send(lambda stage, destroy: _call(_send, self._handle, GROUP if group else USER, _b(receiver), _b(text),
                                                       stage, None, destroy), on_stage)

    def send_media(self, receiver, path, media_type="image", caption=None, on_stage=None, group=False):
        """A media message from a local file (copied into the cache first), as send_text."""
        kind = MEDIA_TYPES[media_type]
        return self._send(lambda stage, destroy: _call(_send_media, self._handle, GROUP if group else USER, _b(receiver), _b(path),
                                                       kind, _b(caption) if caption is not None else None, stage, None, destroy),
                          on_stage)

    def send_custom(self, receiver, custom_type, data, on_stage=None, group=False):
        """A custom message (data: a dict), as send_text."""
        return self._send(lambda stage, destroy: _call(_send_custom, self._handle, GROUP if group else USER, _b(receiver),
                                                       _b(custom_type), _b(json.dumps(data)), stage, None, destroy), on_stage)

    def cached_media_path(self, url):
        """The local path of a cached attachment, or None."""
        return _text(_call(_cached_media, self._handle, _b(url)))

    def download_media(self, url, message_id=0, on_progress=None):
        """Fetches an attachment's bytes (the cache first). With an asyncio loop attached, answers a
        future resolved with the local path (or failed with ChatVaultError)."""
        future = self._loop.create_future() if self._loop is not None else None
        key = None

        def done(path, error, _):
            err = _exception(error)
            if future is not None and not future.done():
                if err is not None:
                    future.set_exception(err)
                else:
                    future.set_result(path.decode())

        c_progress = _PROGRESS(lambda percent, _: on_progress(percent) if on_progress is not None else None)
        c_done = _DOWNLOAD(done)
        c_destroy = _DESTROY(lambda _: self._callbacks.pop(key, None))
        key = self._keep(c_progress, c_done, c_destroy)
        try:
            _call(_download, self._handle, _b(url), message_id, c_progress, c_done, None, c_destroy)
        except ChatVaultError:
            self._callbacks.pop(key, None)
            raise
        return future

    def _send(self, start, on_stage):
        future = self._loop.create_future() if self._loop is not None else None
        key = None

        def stage(name, message, error, _):
            name, message = name.decode(), json.loads(message.decode())
            err = _exception(error)
            if on_stage is not None:
                on_stage(name, message, err)
            if future is not None and not future.done():
                if name == "sent":
                    future.set_result(message)
                elif name == "error" and err.code != "ERROR_INTERNET_UNAVAILABLE":
                    future.set_exception(err)

        def destroyed(_):
            self._callbacks.pop(key, None)
            # A discarded message's send gets no final outcome (the seeds): its future is cancelled.
            if future is not None and not future.done():
                future.cancel()

        c_stage = _SEND(stage)
        c_destroy = _DESTROY(destroyed)
        key = self._keep(c_stage, c_destroy)
        try:
            start(c_stage, c_destroy)
        except ChatVaultError:
            self._callbacks.pop(key, None)
            raise
        return future

    def fileno(self):
        """The descriptor that is readable while callbacks are due."""
        return _fd(self._handle)

    def dispatch(self):
        """Runs the due callbacks on this thread; answers how many ran."""
        return _dispatch(self._handle)

    def attach_asyncio(self, loop=None):
        """Dispatches on an asyncio loop (the running one by default) whenever callbacks are due."""
        import asyncio
        self._loop = loop or asyncio.get_running_loop()
        self._loop.add_reader(self.fileno(), self.dispatch)

    def attach_glib(self, context=None):
        """Dispatches on a GLib main context (the default one when None) whenever callbacks are
        due, as chatvault-glib.h does for C: a GTK app's callbacks then run on its main loop."""
        from gi.repository import GLib
        source = GLib.unix_fd_source_new(self.fileno(), GLib.IOCondition.IN)
        source.set_callback(lambda *_: (self.dispatch(), GLib.SOURCE_CONTINUE)[1])
        source.attach(context)
        self._glib_source = source
        return source

    def close(self):
        if self._handle:
            if self._loop is not None:
                self._loop.remove_reader(self.fileno())
                self._loop = None
            if getattr(self, "_glib_source", None) is not None:
                self._glib_source.destroy()
                self._glib_source = None
            _vault_free(self._handle)
            self._handle = None
            self._callbacks.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
