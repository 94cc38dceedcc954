// What only the package uses, named from outside it: every line marked `// expect:` must fail
// with that error, and nothing else may (Scripts/outside-package checks both). Not an app's code.
import ChatVault
import Foundation
import VaultKeys
import VaultStore

func storage(_ key: CacheKey, directory: String) throws {
    _ = try CacheKey.generate()                          // expect: 'generate' is inaccessible due to 'package' protection level
    key.withHexDigits { _ in }                           // expect: 'withHexDigits' is inaccessible due to 'package' protection level
    try SecureFiles.ensureDirectory(directory)           // expect: cannot find 'SecureFiles' in scope
    _ = checkValue(cacheId: "c")                         // expect: cannot find 'checkValue' in scope
    _ = KeyManager.self                                  // expect: cannot find 'KeyManager' in scope
    _ = CacheOpener.self                                 // expect: cannot find 'CacheOpener' in scope
    _ = AuditJournal.fileName                            // expect: cannot find 'AuditJournal' in scope
    _ = CacheReset(reason: .keyLost, pendingMessagesLost: 0, quarantinedAs: nil)  // expect: 'CacheReset' initializer is inaccessible due to 'package' protection level
}
