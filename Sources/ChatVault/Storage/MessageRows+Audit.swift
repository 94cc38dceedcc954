package import VaultStore

extension MessageRows {
    /// Every cached message that has a server id, by server id: for the package's tools and tests
    /// that compare a cache with a server's truth row for row (the sync crash test).
    package static func allWithServerIds(limits: WireLimits, in db: Database) throws -> [BaseMessage] {
        let stmt = try db.cached("SELECT \(columns) FROM messages WHERE server_id IS NOT NULL ORDER BY server_id")
        defer { stmt.reset() }
        let decoder = WireDecoder(limits: limits, trusted: true)
        var out: [BaseMessage] = []
        while try stmt.step() { out.append(try decode(stmt, decoder)) }
        return out
    }
}
