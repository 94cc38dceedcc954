import VaultStore

/// A `messages` row as a typed value, and the one mapping from the table's columns to its fields.
///
/// Writing: `value(_:)` is the mapping; `updated` and `inserted` list the columns in the order of
/// the statements' parameters, and the SQL is generated from those lists, so parameter n is always
/// the list's column n (names resolved to positions once, when the statement's text is built). The
/// hot path binds by position. Reading: `read` lists what a cached read selects and `at` holds each
/// column's index in it, resolved from the names once, so decoding reads by index too.
///
///     let row = MessageRow(wire, message, me: me, source: .sync)
///     try row.bindInsert(to: try db.cached(MessageRow.insertSQL))
///     let status = MessageStatus(stmt, at: MessageRow.at.status)
struct MessageRow {
    /// The columns of `messages` written from a message (besides `row_id`, the cluster key).
    enum Column: String, CaseIterable {
        case conversationId = "conversation_id"
        case parentId = "parent_id"
        case senderId = "sender_id"
        case receiverId = "receiver_id"
        case receiverType = "receiver_type"
        case category
        case type
        case sentAt = "sent_at"
        case updatedAt = "updated_at"
        case deletedAt = "deleted_at"
        case status
        case source
        case flags
        case payload
        case serverId = "server_id"
        case localId = "local_id"
    }

    var conversationId: String
    var parentId: Int64
    var senderId: String
    var receiverId: String
    var receiverType: String
    var category: String
    var type: String
    var sentAt: Int64
    var updatedAt: Int64
    var deletedAt: Int64
    var status: MessageStatus
    var source: MessageSource
    /// `MessageFlags` of the message for the user it was cached for.
    var flags: Int64
    /// `BinaryJSON` of the wire message.
    var payload: [UInt8]
    var serverId: MessageID
    var localId: String?

    /// The row of a server message as the user `me` caches it.
    /// - Parameter encoded: `BinaryJSON.encode(wire)` when the caller has it already.
    init(_ wire: JSONValue, _ m: BaseMessage, me: String, source: MessageSource, encoded: [UInt8]? = nil) {
        conversationId = m.conversationId
        parentId = Int64(m.parentMessageId)
        senderId = m.senderUid
        receiverId = m.receiverUid
        receiverType = m.receiverType.rawValue
        category = m.messageCategory.rawValue
        type = wire["type"]?.stringValue ?? m.messageType.rawValue
        sentAt = Int64(m.sentAt)
        updatedAt = Int64(clampingWire: m.updatedAt)
        deletedAt = Int64(clampingWire: m.deletedAt)
        status = MessageRows.status(of: m, me: me)
        self.source = source
        flags = MessageFlags.of(m, me: me)
        payload = encoded ?? BinaryJSON.encode(wire)
        serverId = m.messageID
        localId = m.localMessageId
    }

    /// The mapping: the value a column holds for this row.
    func value(_ column: Column) -> DatabaseValue {
        switch column {
        case .conversationId: return .text(conversationId)
        case .parentId: return .int(parentId)
        case .senderId: return .text(senderId)
        case .receiverId: return .text(receiverId)
        case .receiverType: return .text(receiverType)
        case .category: return .text(category)
        case .type: return .text(type)
        case .sentAt: return .int(sentAt)
        case .updatedAt: return .int(updatedAt)
        case .deletedAt: return .int(deletedAt)
        case .status: return .int(status.storedCode)
        case .source: return .int(source.storedCode)
        case .flags: return .int(flags)
        case .payload: return .blob(payload)
        case .serverId: return .int(Int64(serverId.rawValue))
        case .localId: return localId.map { .text($0) } ?? .null
        }
    }

    /// Binds the parameters of `updateSQL`.
    func bindUpdate(to stmt: Statement) throws {
        try bind(Self.updated, to: stmt)
    }

    /// Binds the parameters of `insertSQL`: the columns, then the cluster key of the row's
    /// conversation.
    func bindInsert(to stmt: Statement) throws {
        try bind(Self.inserted, to: stmt)
        try stmt.bind(.int(MessageClusters.base(of: conversationId)), at: Int32(Self.inserted.count + 1))
    }

    /// Binds `columns` (a statement's parameter list) in order.
    private func bind(_ columns: [Column], to stmt: Statement) throws {
        for (index, column) in columns.enumerated() {
            try stmt.bind(value(column), at: Int32(index + 1))
        }
    }

    // MARK: - Statements, generated from the column lists

    /// The columns an update rewrites (a cached row keeps its local id), then the key.
    static let updated: [Column] = Column.allCases.filter { $0 != .serverId && $0 != .localId } + [.serverId]

    /// Every column; the cluster key follows (`MessageClusters.insertSQL`).
    static let inserted: [Column] = Column.allCases

    static let updateSQL: String = {
        let set = updated.dropLast().enumerated().map { "\($0.element.rawValue) = ?\($0.offset + 1)" }.joined(separator: ", ")
        return "UPDATE messages SET \(set) WHERE server_id = ?\(updated.count)"
    }()

    static let insertSQL = MessageClusters.insertSQL(columns: inserted.map(\.rawValue))

    // MARK: - Reading

    /// What a cached read selects, in order.
    static let read: [Column] = [.payload, .status, .source, .localId, .sentAt, .serverId]

    /// Each read column's index in `read`, resolved from the names once.
    struct ReadIndex {
        let payload: Int32
        let status: Int32
        let source: Int32
        let localId: Int32
        let sentAt: Int32
        let serverId: Int32
        /// The index after the last read column (queries that select more put it there).
        let next: Int32

        init(_ columns: [Column]) {
            func index(_ column: Column) -> Int32 { Int32(columns.firstIndex(of: column) ?? -1) }
            payload = index(.payload)
            status = index(.status)
            source = index(.source)
            localId = index(.localId)
            sentAt = index(.sentAt)
            serverId = index(.serverId)
            next = Int32(columns.count)
        }
    }

    /// The indices of `read`.
    static let at = ReadIndex(read)
}
