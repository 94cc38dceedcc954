import ChatVault
import Foundation
import VaultStore

/// `chatvault search --dir D --user U QUERY [--conversation user:UID|group:GUID] [--sender UID]
/// [--order newest|oldest|relevance] [--limit N] [--show-text] [--progress] [--keystore …] [--json]`: searches
/// the user's cached messages as an app would (`searchCachedMessages`), offline (no server), after
/// the index build has finished (`waitForSearchIndex`).
///
/// What is printed: each hit's id, conversation, sender, type and time, and how far the index is.
/// The snippet (message content) only with `--show-text`; the query is never printed or logged.
/// `--progress` prints the index build's progress first (`index I/T` lines) while it runs.
enum SearchCommand {
    static let switches: Set<String> = ["json", "show-text", "progress"]

    /// Prints the index build's progress as `index I/T` lines (counts only).
    final class ProgressLines: SearchIndexListener {
        func onSearchIndexProgress(_ progress: SearchIndexProgress) {
            emit("index \(progress.indexedMessages)/\(progress.totalMessages)\(progress.isComplete ? " complete" : "")")
        }
    }

    static func run(_ raw: [String]) async throws -> Int32 {
        // QUERY is the one argument that is neither an option nor an option's value.
        var options: [String] = []
        var positional: [String] = []
        var i = 0
        while i < raw.count {
            let arg = raw[i]
            if arg.hasPrefix("--"), arg.count > 2 {
                options.append(arg)
                let name = String(arg.dropFirst(2))
                if !switches.contains(name), !name.contains("="), i + 1 < raw.count {
                    options.append(raw[i + 1])
                    i += 1
                }
            } else {
                positional.append(arg)
            }
            i += 1
        }
        var args = try Arguments(options, switches: switches)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let conversation = try args.string("conversation").map(scope)
        let sender = args.string("sender")
        let order = try args.choice("order", default: "newest", among: ["newest", "oldest", "relevance"])
        let limit = try args.int("limit", default: 20, range: 1...100)
        let showText = args.flag("show-text")
        let showProgress = args.flag("progress")
        let encryption = try args.choice("encryption", default: "on", among: ["on", "off"]) == "on"
        if let query = args.string("query") { positional.append(query) }
        try args.rejectUnknown()
        guard positional.count == 1, let query = positional.first else {
            throw CLIError.usage("give one QUERY (quote it when it has spaces)")
        }

        let vault = try makeVault(common, root: root, encryption: encryption, behavior: .onlineOnly)
        let lines = ProgressLines()
        if showProgress { vault.addSearchIndexListener("chatvault-search", lines) }
        let attempt = await vault.login(userId: user)
        guard vault.isOfflineEnabled() else {
            await vault.logout()
            throw CLIError.failure("cannot search: the cache is \(attempt.state.outcome)" + (attempt.state.detail.map { " (\($0))" } ?? ""))
        }
        await vault.waitForSearchIndex()
        withExtendedLifetime(lines) {}
        var request = CachedSearchOptions()
        request.conversation = conversation
        request.senderUid = sender
        request.limit = limit
        request.order = order == "oldest" ? .oldestFirst : order == "relevance" ? .relevance : .newestFirst
        let page: CachedSearchPage
        do {
            page = try await vault.searchCachedMessages(query, options: request)
        } catch {
            await vault.logout()
            throw CLIError(message: "search refused: \(error.errorCode) (\(error.details ?? "-"))",
                           status: error.errorCode == OfflineErrorCode.invalidSearchQuery.rawValue ? 2 : 1)
        }
        await vault.logout()

        let progress = page.indexProgress
        if common.json {
            emit(JSON.object([
                ("hits", .array(page.hits.map { hit in
                    var fields: [(String, JSON)] = [
                        ("id", .int(hit.message.id)),
                        ("conversationId", .string(hit.message.conversationId)),
                        ("sender", .string(hit.message.senderUid)),
                        ("type", .string(hit.message.messageType.rawValue)),
                        ("sentAt", .int(hit.message.sentAt)),
                        ("matches", .int(hit.matches.count)),
                    ]
                    if showText { fields.append(("snippet", .string(hit.snippet))) }
                    return .object(fields)
                })),
                ("more", .bool(page.nextCursor != nil)),
                ("indexComplete", .bool(page.indexComplete)),
                ("indexedMessages", .int(progress.indexedMessages)),
                ("totalMessages", .int(progress.totalMessages)),
            ]).render())
        } else {
            var table = Table(header: showText ? ["id", "conversation", "sender", "type", "sent", "snippet"]
                                               : ["id", "conversation", "sender", "type", "sent", "matches"])
            for hit in page.hits {
                let m = hit.message
                let sent = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(m.sentAt)))
                table.rows.append([String(m.id), m.conversationId, m.senderUid, m.messageType.rawValue, sent,
                                   showText ? hit.snippet : String(hit.matches.count)])
            }
            emit(table.render())
            emit("\(page.hits.count) found\(page.nextCursor != nil ? " (more beyond --limit)" : ""); index \(progress)")
        }
        return 0
    }

    /// `user:UID` or `group:GUID`.
    static func scope(_ text: String) throws -> MessageScope {
        if text.hasPrefix("user:"), text.count > 5 { return .user(String(text.dropFirst(5))) }
        if text.hasPrefix("group:"), text.count > 6 { return .group(String(text.dropFirst(6))) }
        throw CLIError.usage("--conversation must be user:UID or group:GUID")
    }
}
