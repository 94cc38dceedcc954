import Foundation
internal import CCrypto
import VaultKeys

/// Reading SQLCipher pages by hand, for the one question SQLite cannot answer once a file's
/// first bytes are damaged: is this the file's key?
///
/// SQLCipher 3 (raw key) encrypts every page with AES-256-CBC under the key itself and keeps the
/// page's IV in its reserved tail (`pageSize - reserve`); the HMAC beside it is keyed from the
/// salt in the file's first 16 bytes. A damaged header loses the salt, so SQLite can no longer
/// check any page, but the pages still decrypt: under the right key they are b-tree pages with
/// consistent headers, under any other key noise. Plaintext never leaves this type: buffers are
/// zeroed after each page.
enum PageCipher {
    /// The reserved tail of each page: the IV (16), plus the HMAC-SHA1 (20) when on, rounded up
    /// to the AES block (16).
    static func reserve(useHMAC: Bool) -> Int { useHMAC ? 48 : 16 }

    /// Whether `key` decrypts at least `needed` of the first pages after page 1 into b-tree pages.
    static func keyDecryptsPages(of path: String, key: CacheKey, pageSizes: [Int], needed: Int = 2, looking: Int = 24) -> Bool {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return false }
        for pageSize in pageSizes {
            for useHMAC in [true, false] {
                let pages = Int(st.st_size) / pageSize
                guard pages >= 2 else { continue }
                var passing = 0
                for number in 2...min(pages, looking + 1) {
                    let ok = withDecryptedPage(fd, number: number, pageSize: pageSize, reserve: reserve(useHMAC: useHMAC), key: key) { content in
                        looksLikeBTreePage(content, usable: pageSize - reserve(useHMAC: useHMAC))
                    } ?? false
                    if ok { passing += 1 }
                    if passing >= needed { return true }
                }
            }
        }
        return false
    }

    /// Decrypts page `number` (1-based) and hands its content (without the reserved tail; for
    /// page 1, without the salt in front either) to `body`; the plaintext is zeroed afterwards.
    static func withDecryptedPage<R>(_ fd: Int32, number: Int, pageSize: Int, reserve: Int, key: CacheKey,
                                     _ body: ([UInt8]) -> R) -> R? {
        guard number >= 1, reserve + 16 < pageSize else { return nil }
        var page = [UInt8](repeating: 0, count: pageSize)
        guard pread(fd, &page, pageSize, off_t(number - 1) * off_t(pageSize)) == pageSize else { return nil }
        let iv = Array(page[(pageSize - reserve)..<(pageSize - reserve + 16)])
        if number == 1 { page = Array(page[16...]) }
        let length = page.count - reserve
        var plain = [UInt8](repeating: 0, count: length + 32)
        defer { for i in plain.indices { plain[i] = 0 } }
        guard let ctx = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let decrypted = key.withUnsafeBytes { keyBytes -> Bool in
            guard EVP_DecryptInit_ex(ctx, EVP_aes_256_cbc(), nil, keyBytes.bindMemory(to: UInt8.self).baseAddress, iv) == 1 else { return false }
            EVP_CIPHER_CTX_set_padding(ctx, 0)
            var out: Int32 = 0
            return EVP_DecryptUpdate(ctx, &plain, &out, page, Int32(length)) == 1 && Int(out) == length
        }
        guard decrypted else { return nil }
        var content = Array(plain[0..<length])
        defer { for i in content.indices { content[i] = 0 } }
        return body(content)
    }

    /// A b-tree page header that holds together: a known page type, a cell count and content
    /// offset that fit the page, cell pointers inside the content area.
    static func looksLikeBTreePage(_ content: [UInt8], usable: Int) -> Bool {
        guard content.count >= 12 else { return false }
        let type = content[0]
        guard [2, 5, 10, 13].contains(type) else { return false }
        let headerSize = (type == 2 || type == 5) ? 12 : 8
        let freeblock = Int(content[1]) << 8 | Int(content[2])
        let cells = Int(content[3]) << 8 | Int(content[4])
        var contentStart = Int(content[5]) << 8 | Int(content[6])
        if contentStart == 0 { contentStart = 65536 }
        let fragmented = Int(content[7])
        let pointersEnd = headerSize + 2 * cells
        guard fragmented <= 60, cells <= usable / 4, pointersEnd <= contentStart, contentStart <= usable,
              freeblock == 0 || (freeblock >= contentStart && freeblock < usable) else { return false }
        for i in 0..<cells {
            let at = headerSize + 2 * i
            let pointer = Int(content[at]) << 8 | Int(content[at + 1])
            guard pointer >= contentStart, pointer < usable else { return false }
        }
        return true
    }
}
