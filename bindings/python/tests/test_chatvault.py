"""The Python binding over an installed libchatvault (Scripts/test-capi sets CHATVAULT_LIBRARY)."""
import asyncio
import os

import pytest

import chatvault


def settings(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    return dict(enabled=True, encryption=True, applicationId="org.chatvault.pytest", rootDirectory=str(tmp_path / "root"),
                keyStore="software", keyDirectory=str(keys))


@pytest.fixture
def server():
    with chatvault.Simulator(seed=5) as s:
        s.add_user("alice", "Alice")
        s.add_user("bob", "Bob")
        yield s


def test_errors_carry_the_c_code(server, tmp_path):
    with pytest.raises(chatvault.ChatVaultError) as refused:
        chatvault.Vault(server, "alice", applicationId="x", bogus=1)
    assert refused.value.domain == "chatvault-argument"
    assert refused.value.code == "ERR_INVALID_ARGUMENT"
    with pytest.raises(chatvault.ChatVaultError):
        server.add_user("bob", "Bob again")
    assert chatvault.version().count(".") == 2


def test_a_two_phase_read_online_then_offline(server, tmp_path):
    server.post_text("bob", "alice", "hello from bob")
    with chatvault.Vault(server, "alice", **settings(tmp_path)) as vault:
        state, detail = vault.login("alice")
        assert state == chatvault.OpenState.READY and detail is None
        assert vault.is_offline_enabled()
        assert vault.encryption_status()["atRest"] == "SQLCIPHER"
        assert [(e["kind"], e.get("outcome")) for e in vault.audit_journal()] == [("opened", "ready")]
        first = vault.fetch_messages("bob")
        assert first["cached"] == []
        assert [m["text"] for m in first["server"]] == ["hello from bob"]
        assert [c["with"] for c in vault.fetch_conversations()["server"]] == ["bob"]
        server.set_online("alice", False)
        offline = vault.fetch_messages("bob")
        assert [m["text"] for m in offline["cached"]] == ["hello from bob"]
        assert offline["server"] is None and offline["serverError"]["code"] == "ERROR_INTERNET_UNAVAILABLE"
        conversations = vault.fetch_conversations()
        assert [c["with"] for c in conversations["cached"]] == ["bob"]


def test_sends_on_an_asyncio_loop_including_one_queued_offline(server, tmp_path):
    async def main():
        with chatvault.Vault(server, "alice", **settings(tmp_path)) as vault:
            vault.attach_asyncio()
            assert vault.login("alice")[0] == chatvault.OpenState.READY
            stages = []
            sent = await asyncio.wait_for(vault.send_text("bob", "hi bob", on_stage=lambda s, m, e: stages.append(s)), 20)
            assert sent["text"] == "hi bob" and sent["status"] in ("sent", "delivered", "read")
            assert stages == ["pending", "sent"]
            server.set_online("alice", False)
            queued = vault.send_text("bob", "while offline")
            await asyncio.sleep(0.5)
            assert not queued.done()
            assert [m["text"] for m in vault.pending_messages()] == ["while offline"]
            server.set_online("alice", True)
            later = await asyncio.wait_for(queued, 30)
            assert later["text"] == "while offline"
            assert vault.pending_messages() == []

    asyncio.run(main())


def test_realtime_messages_and_listener_removal(server, tmp_path):
    async def main():
        with chatvault.Vault(server, "alice", **settings(tmp_path)) as vault:
            vault.attach_asyncio()
            heard = []
            listener = vault.on_message(lambda event, message: heard.append((event, message.get("text"))))
            assert vault.login("alice")[0] == chatvault.OpenState.READY
            server.post_text("bob", "alice", "live")
            for _ in range(200):
                if ("received", "live") in heard:
                    break
                await asyncio.sleep(0.02)
            assert ("received", "live") in heard
            vault.remove_listener(listener)
            with pytest.raises(chatvault.ChatVaultError):
                vault.remove_listener(listener)

    asyncio.run(main())


def test_the_reset_listener_hears_a_lost_key(server, tmp_path):
    config = settings(tmp_path)
    with chatvault.Vault(server, "alice", **config) as vault:
        assert vault.login("alice")[0] == chatvault.OpenState.READY
    # The key files go (the store's own hidden files, its lock among them, stay).
    for name in os.listdir(config["keyDirectory"]):
        if not name.startswith("."):
            os.unlink(os.path.join(config["keyDirectory"], name))
    with chatvault.Vault(server, "alice", **config) as vault:
        resets = []
        vault.on_reset(lambda reason, lost: resets.append((reason, lost)))
        state, detail = vault.login("alice")
        assert state == chatvault.OpenState.READY, detail
        assert resets == [(chatvault.ResetReason.KEY_LOST, 0)] or resets == [(chatvault.ResetReason.KEY_LOST, -1)]


def test_sends_and_realtime_on_a_glib_main_loop(server, tmp_path):
    """Callbacks on a GLib main context of the app's choosing, on the thread that runs its loop."""
    import threading

    from gi.repository import GLib

    context = GLib.MainContext.new()
    loop = GLib.MainLoop.new(context, False)
    threads, stages, heard = set(), [], []
    with chatvault.Vault(server, "alice", **settings(tmp_path)) as vault:
        vault.attach_glib(context)
        vault.on_message(lambda event, message: (threads.add(threading.get_ident()), heard.append(message.get("text"))))
        assert vault.login("alice")[0] == chatvault.OpenState.READY

        def stage(name, message, error):
            threads.add(threading.get_ident())
            stages.append(name)
            if name == "sent":
                server.post_text("bob", "alice", "answer on the loop")

        vault.send_text("bob", "hi over glib", on_stage=stage)
        deadline = GLib.get_monotonic_time() + 20_000_000

        def done():
            if "answer on the loop" in heard or GLib.get_monotonic_time() > deadline:
                loop.quit()
                return GLib.SOURCE_REMOVE
            return GLib.SOURCE_CONTINUE

        timer = GLib.timeout_source_new(20)
        timer.set_callback(lambda *_: done())
        timer.attach(context)
        loop.run()
        assert stages == ["pending", "sent"]
        assert "answer on the loop" in heard
        assert threads == {threading.get_ident()}
        # Nothing is dispatched while the context does not run: the default context never sees it.
        server.post_text("bob", "alice", "while the loop is stopped")
        GLib.MainContext.default().iteration(False)
        assert "while the loop is stopped" not in heard


def test_paged_reads_both_ways_and_lookups(server, tmp_path):
    ids = [server.post_text("bob", "alice", f"m{i}") for i in range(25)]
    with chatvault.Vault(server, "alice", **settings(tmp_path)) as vault:
        assert vault.login("alice")[0] == chatvault.OpenState.READY
        with vault.request("messages", uid="bob", limit=10) as older:
            pages = [older.fetch_previous()["server"] for _ in range(3)]
        assert [len(p) for p in pages] == [10, 10, 5]
        assert sorted(m["id"] for p in pages for m in p) == ids
        with vault.request("messages", uid="bob", limit=10, messageId=ids[4]) as newer:
            assert [m["id"] for m in newer.fetch_next()["server"]] == ids[5:15]
        with vault.request("users") as users:
            assert {u["uid"] for u in users.fetch_next()["server"]} >= {"bob"}
        with pytest.raises(chatvault.ChatVaultError) as refused:
            vault.request("messages", uid="bob", limit=1000)
        assert refused.value.code == "ERR_INVALID_ARGUMENT"
        found = vault.get_message(ids[-1])
        assert found["cached"]["text"] == "m24" and found["server"]["id"] == ids[-1]
        online = vault.get_conversation("bob")
        assert online["server"]["with"] == "bob" and online["serverError"] is None
        server.set_online("alice", False)
        offline = vault.get_conversation("bob")
        assert offline["cached"]["with"] == "bob" and offline["serverError"]["code"] == "ERROR_INTERNET_UNAVAILABLE"


def test_text_crosses_the_json_boundary_unchanged(server, tmp_path):
    """Quotes, backslashes, control characters, non-ASCII and emoji survive the C layer's JSON."""
    hostile = 'a "quoted" \\ back\\slash\n\ttab \x01\x1f ünïcødé 東京 🙂 </script> {"json": [1]}'
    server.post_text("bob", "alice", hostile)
    with chatvault.Vault(server, "alice", **settings(tmp_path)) as vault:
        assert vault.login("alice")[0] == chatvault.OpenState.READY
        assert [m["text"] for m in vault.fetch_messages("bob")["server"]] == [hostile]
        assert [m["text"] for m in vault.fetch_messages("bob")["cached"]] == [hostile]


def test_media_custom_and_the_sync_listener_on_asyncio(server, tmp_path):
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(os.urandom(200_000))
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)

    async def main():
        with chatvault.Vault(server, "alice", media={"runtimeDirectory": str(runtime)}, **settings(tmp_path)) as vault:
            vault.attach_asyncio()
            phases = []
            vault.on_sync(lambda event, payload, error: phases.append((event, payload, error)))
            assert vault.login("alice")[0] == chatvault.OpenState.READY
            sent = await asyncio.wait_for(vault.send_media("bob", str(photo), caption="a view"), 30)
            assert sent["attachment"]["url"].startswith("http") and sent["caption"] == "a view"
            custom = await asyncio.wait_for(vault.send_custom("bob", "location", {"lat": 52.5}), 30)
            assert custom["customType"] == "location" and custom["customData"] == {"lat": 52.5}
            message_id, url = server.post_media("bob", "alice", str(photo), caption="from bob")
            assert vault.cached_media_path(url) is None
            progress = []
            path = await asyncio.wait_for(vault.download_media(url, message_id, on_progress=progress.append), 30)
            assert progress and progress[-1] == 100 and progress == sorted(progress)
            with open(path, "rb") as f:
                assert f.read() == photo.read_bytes()
            assert vault.cached_media_path(url) == path
            # A catch-up: a text sent while alice was away reaches the sync listener's payload (after
            # the login's own sweep, which sets the point a later catch-up replays from).
            for _ in range(1000):
                if any(e == chatvault.SyncEvent.MESSAGES_COMPLETED for e, _, _ in phases):
                    break
                await asyncio.sleep(0.02)
            server.set_online("alice", False)
            server.post_text("bob", "alice", "while you were away")
            phases.clear()
            server.set_online("alice", True)

            def brought():
                return any("while you were away" in [m.get("text") for m in p["messages"]]
                           for e, p, _ in phases if e == chatvault.SyncEvent.MESSAGES_COMPLETED)

            for _ in range(1000):
                if brought():
                    break
                await asyncio.sleep(0.02)
            assert brought(), phases
            assert all(error is None for _, _, error in phases)

    asyncio.run(main())


def test_local_search_pages_highlights_and_errors(server, tmp_path):
    ids = [server.post_text("bob", "alice", f"train {i} to the Crème brûlée café") for i in range(5)]
    server.post_text("bob", "alice", "東京駅で会いましょう")

    async def main():
        with chatvault.Vault(server, "alice", **settings(tmp_path)) as vault:
            vault.attach_asyncio()
            progress = []
            vault.on_search_index(lambda indexed, total, complete: progress.append((indexed, total, complete)))
            assert vault.login("alice")[0] == chatvault.OpenState.READY
            vault.fetch_messages("bob")  # the server phase caches them
            vault.wait_for_search_index()
            assert vault.search_index_progress()[2] is True
            for _ in range(200):
                if progress and progress[-1][2]:
                    break
                await asyncio.sleep(0.02)
            assert progress and progress[-1][2] and progress[-1][0] == progress[-1][1]

            page = vault.search("brulee", conversation="bob", limit=2)
            assert page.index_complete and page.indexed_messages == page.total_messages == 6
            seen = []
            while True:
                for hit in page.hits:
                    seen.append(hit["message"]["id"])
                    for text, marks in ((hit["text"], hit["matches"]), (hit["snippet"], hit["snippet_matches"])):
                        assert [text[start:start + length] for start, length in marks] == ["brûlée"]
                if page.next_cursor is None:
                    break
                page = vault.search("brulee", conversation="bob", limit=2, cursor=page.next_cursor)
            assert sorted(seen) == ids
            oldest = vault.search("cafe", order="oldest", limit=100)
            assert [h["message"]["id"] for h in oldest.hits] == ids
            assert [h["text"][s:s + n] for h in oldest.hits for s, n in h["matches"]] == ["café"] * 5
            tokyo = vault.search("東京").hits
            assert len(tokyo) == 1 and [tokyo[0]["text"][s:s + n] for s, n in tokyo[0]["matches"]] == ["東京"]
            assert vault.search("train", types=["image"]).hits == []
            assert len(vault.search("train", sender="bob", categories=["message"], order="relevance").hits) == 5

            for hostile, details in [("", "empty"), ("  ", "empty"), ("-train", "onlyExclusions"), ("x" * 2000, "tooLong")]:
                with pytest.raises(chatvault.ChatVaultError) as refused:
                    vault.search(hostile)
                assert refused.value.code == "ERROR_INVALID_SEARCH_QUERY" and refused.value.domain == "chatvault"
                assert refused.value.details == details
            assert vault.search('"; DROP TABLE messages; -- NEAR(*)').hits == []
            with pytest.raises(chatvault.ChatVaultError) as bad:
                vault.search("train", limit=0)
            assert bad.value.code == "ERR_INVALID_ARGUMENT" and bad.value.details is None

            # The asynchronous form, on the loop.
            found = await asyncio.wait_for(vault.search_async("train", limit=3), 20)
            assert len(found.hits) == 3 and found.next_cursor is not None
            with pytest.raises(chatvault.ChatVaultError) as refused:
                await asyncio.wait_for(vault.search_async("-train"), 20)
            assert refused.value.code == "ERROR_INVALID_SEARCH_QUERY"

    asyncio.run(main())
